"""Large arrays between the engine host and the Studio, without pickling megabytes through a pipe.

The sender writes an array's bytes to a file of the host's directory (in ``/dev/shm`` where it exists:
memory, not disk) and puts a descriptor in the JSON message in its place:
``{"$array": {"file": NAME, "dtype": "<f4", "shape": [2, 3]}}``. The receiver reads the file into
its own memory and deletes it. The descriptor is checked before anything is read (a plain name in
the agreed directory, a plain numeric dtype, a size that matches the shape), so a host that went
wrong cannot make the GUI read another file or allocate past what the file holds. Both ways
use it: answers (values, histograms) from the host, inputs from the Studio.
"""
from __future__ import annotations

import itertools
import math
import os
import shutil
import tempfile
from typing import Any

import numpy as np

_KEY = "$array"
_KINDS = "biufc"          # bool, ints, floats, complex: nothing with Python objects inside


def shared_directory(prefix: str = "nac-host-") -> str:
    """A new private directory for one host's array files (memory-backed where Linux offers it)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def remove_directory(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


class ArrayWriter:
    """``put(array)`` writes it and returns its descriptor. The host writes its answers' arrays,
    the Studio its requests' (inputs); ``prefix`` keeps their names apart in the one directory."""

    def __init__(self, directory: str, prefix: str = "a"):
        self.directory = directory
        self.prefix = prefix
        self._names = itertools.count()

    def put(self, array: Any) -> dict:
        arr = np.ascontiguousarray(array)
        if arr.dtype.kind not in _KINDS:
            raise TypeError(f"arrays of {arr.dtype} do not cross to the Studio")
        name = f"{self.prefix}{next(self._names)}.bin"
        path = os.path.join(self.directory, name)
        with open(path + ".part", "wb") as f:
            arr.tofile(f)
        os.replace(path + ".part", path)      # the client never sees half an array
        return {_KEY: {"file": name, "dtype": arr.dtype.str, "shape": list(arr.shape)}}

    def encode(self, value: Any) -> Any:
        """``value`` with every numpy array in it (in dicts, lists, tuples) replaced by a descriptor."""
        if isinstance(value, np.ndarray):
            return self.put(value)
        if isinstance(value, dict):
            return {k: self.encode(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.encode(v) for v in value]
        if isinstance(value, np.generic):
            return value.item()
        return value


class ArrayError(Exception):
    """A descriptor the client refuses (wrong place, dtype or size)."""


def take(descriptor: dict, directory: str) -> np.ndarray:
    """Client side: the array a descriptor names, read into memory; its file is deleted."""
    name, dtype, shape = descriptor.get("file"), descriptor.get("dtype"), descriptor.get("shape")
    if not isinstance(name, str) or os.path.basename(name) != name or name.startswith("."):
        raise ArrayError(f"array file {name!r} is not a plain name")
    try:
        dt = np.dtype(dtype) if isinstance(dtype, str) and len(dtype) <= 8 else None
    except TypeError:
        dt = None
    if dt is None or dt.kind not in _KINDS or dt.fields is not None or dt.subdtype is not None:
        raise ArrayError(f"array dtype {dtype!r} is not a plain numeric type")
    if not isinstance(shape, list) or len(shape) > 32 or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise ArrayError(f"array shape {shape!r} is not a list of sizes")
    path = os.path.join(directory, name)
    try:
        size = os.stat(path).st_size
        if size != math.prod(shape) * dt.itemsize:
            raise ArrayError(f"array file {name} holds {size} bytes, not {shape} x {dt.itemsize}")
        arr = np.fromfile(path, dtype=dt).reshape(shape)
    except OSError as e:
        raise ArrayError(f"array file {name}: {e.strerror or e}") from None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return arr


def decode(value: Any, directory: str) -> Any:
    """``value`` with every descriptor replaced by its array (the inverse of ``ArrayWriter.encode``)."""
    if isinstance(value, dict):
        if _KEY in value and len(value) == 1 and isinstance(value[_KEY], dict):
            return take(value[_KEY], directory)
        return {k: decode(v, directory) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v, directory) for v in value]
    return value
