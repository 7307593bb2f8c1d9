"""Large weights stand in the graph for their values, which are read when the file is written.

A compile needs a weight's values only to write them. Holding every weight in memory while the
graph is exported, optimised and written costs the model's size once (in-memory compile) or
twice (a checkpoint loaded, then converted); a 7-billion-parameter model does not fit. So:

* Every parameter of at least :data:`DEFER_MIN_BYTES` becomes a :class:`DeferredWeight` in its
  graph node (``node.tensor``) — in every compile, whether its values are in memory
  (:class:`HeldWeight`) or in a checkpoint's safetensors shards (:class:`CheckpointWeight`). The
  passes do not look into deferred weights (``passes.common.constant_tensor`` gives None,
  ``fold_constants`` does not fold through them), so the graph, and the bytes written, are the same
  either way. Smaller parameters (norm scales, biases, folded masks) are real tensors: the passes
  may read them (an all-ones RMSNorm scale is dropped as a multiplication by 1).
* ``emit`` gives a deferred weight's parameter a :class:`DeferredPayload`, and the writer reads it
  once, when its turn comes (``format.safetensors_file.write_safetensors`` for external weights).

:class:`Checkpoint` resolves a parameter name to a tensor in a Hugging Face directory's shards
(``model.safetensors`` or ``model.safetensors.index.json``), allowing for the base-model prefix a
task head adds or removes (``model.layers.0...`` vs ``layers.0...``).
"""
from __future__ import annotations

import math
import os
from typing import Optional

import numpy as np
import torch

from ..format.deferred_values import DeferredValues
from ..format.safetensors_file import SafetensorsFile
from .errors import CompileError

#: Parameters of at least this many bytes are deferred (module docstring). A norm scale of a
#: 7B model is 16 KB, a weight matrix tens of MB: the rule separates them with room to spare.
DEFER_MIN_BYTES = 1 << 20
_DEFERRABLE = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
               torch.int16, torch.int8, torch.uint8, torch.bool)


class DeferredWeight:
    """A weight's shape and dtype now, its values on :meth:`load` (a fresh contiguous CPU tensor)."""

    def __init__(self, shape: tuple, dtype: torch.dtype):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def load(self) -> torch.Tensor:         # pragma: no cover - every subclass defines it
        raise NotImplementedError


class HeldWeight(DeferredWeight):
    """A weight whose values are already in memory (a model compiled from Python)."""

    def __init__(self, tensor: torch.Tensor):
        super().__init__(tuple(tensor.shape), tensor.dtype)
        self._tensor = tensor

    def load(self) -> torch.Tensor:
        return self._tensor.detach().cpu().contiguous()


class CheckpointWeight(DeferredWeight):
    """A weight read from a checkpoint shard, converted to the dtype the model computes in."""

    def __init__(self, checkpoint: "Checkpoint", key: str, shape: tuple, dtype: torch.dtype):
        super().__init__(shape, dtype)
        self._checkpoint = checkpoint
        self._key = key

    def load(self) -> torch.Tensor:
        return self._checkpoint.tensor(self._key, self.dtype, self.shape)


class DeferredPayload(DeferredValues):
    """A parameter's stored values from its deferred weight (what ``emit`` stores as a payload)."""

    def __init__(self, weight: DeferredWeight, to_array):
        self.weight = weight
        self._to_array = to_array            # torch tensor -> the stored little-endian array

    def load(self) -> np.ndarray:
        return self._to_array(self.weight.load())


def defer_large(graph, checkpoint: Optional["Checkpoint"] = None, min_bytes: Optional[int] = None) -> int:
    """Make the large weights of ``graph`` deferred (module docstring); returns how many. A fake
    weight (a model built without its values) must be in ``checkpoint``; a small one is read now."""
    from torch._subclasses.fake_tensor import FakeTensor
    min_bytes = DEFER_MIN_BYTES if min_bytes is None else min_bytes
    count = 0
    for node in graph.nodes:
        t = node.tensor
        if node.kind != "param" or not isinstance(t, torch.Tensor):
            continue
        fake = isinstance(t, FakeTensor) or t.is_meta
        if fake:
            if checkpoint is None:
                raise CompileError(f"parameter {node.name!r} has no values (a model built without its "
                                   "weights needs the checkpoint they are in)", stage="export")
            w = checkpoint.weight(node.name, tuple(t.shape), t.dtype)
        elif t.dtype in _DEFERRABLE and t.numel() * t.element_size() >= min_bytes:
            w = HeldWeight(t)
        else:
            continue
        node.tensor = w.load() if w.nbytes < min_bytes else w
        count += isinstance(node.tensor, DeferredWeight)
    return count


class Checkpoint:
    """The tensors of a Hugging Face directory's safetensors shards, by name."""

    def __init__(self, directory: str, prefix: str = ""):
        self.directory = os.fspath(directory)
        self.prefix = prefix                       # the model's base_model_prefix ("model", "transformer")
        self.wrapper = ""                          # the attribute a wrapping module holds the model in
        index = os.path.join(self.directory, "model.safetensors.index.json")
        single = os.path.join(self.directory, "model.safetensors")
        self._where: dict[str, str] = {}
        if os.path.isfile(index):
            try:
                with open(index, "rb") as fh:
                    from ..format import bounded_json
                    data = bounded_json.loads(fh.read(64 << 20), what=index)
                weight_map = data["weight_map"]
                if not isinstance(weight_map, dict):
                    raise TypeError("weight_map is not an object")
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise CompileError(f"{index}: not a usable safetensors index: {e}", stage="hf") from None
            for key, shard in weight_map.items():
                path = os.path.normpath(os.path.join(self.directory, str(shard)))
                if os.path.dirname(path) != os.path.normpath(self.directory):
                    raise CompileError(f"{index}: shard {shard!r} lies outside the directory", stage="hf")
                self._where[str(key)] = path
        elif os.path.isfile(single):
            self._where = {k: single for k in SafetensorsFile(single).keys()}
        else:
            raise CompileError(f"{self.directory}: no model.safetensors or model.safetensors.index.json",
                               stage="hf")
        self._files: dict[str, SafetensorsFile] = {}

    @staticmethod
    def present(directory: str) -> bool:
        return any(os.path.isfile(os.path.join(directory, f))
                   for f in ("model.safetensors", "model.safetensors.index.json"))

    def key_for(self, name: str) -> Optional[str]:
        """The checkpoint key holding parameter ``name`` of the model being compiled."""
        if self.wrapper and name.startswith(self.wrapper + "."):
            name = name[len(self.wrapper) + 1:]
        candidates = [name]
        if self.prefix:
            candidates.append(f"{self.prefix}.{name}")
            if name.startswith(self.prefix + "."):
                candidates.append(name[len(self.prefix) + 1:])
        return next((k for k in candidates if k in self._where), None)

    def weight(self, name: str, shape: tuple, dtype: torch.dtype) -> CheckpointWeight:
        key = self.key_for(name)
        if key is None:
            raise CompileError(f"parameter {name!r} is not in the checkpoint's shards ({self.directory}); "
                               "a weight the checkpoint does not hold would be random", stage="hf")
        entry = self._file(key).entries.get(key)
        if entry is None:
            raise CompileError(f"the index puts {key!r} in {self._where[key]}, which does not hold it", stage="hf")
        if tuple(entry.shape) != tuple(shape):
            raise CompileError(f"checkpoint tensor {key!r} has shape {list(entry.shape)}, the model expects "
                               f"{list(shape)}", stage="hf")
        return CheckpointWeight(self, key, shape, dtype)

    def _file(self, key: str) -> SafetensorsFile:
        path = self._where[key]
        f = self._files.get(path)
        if f is None:
            f = self._files[path] = SafetensorsFile(path)
        return f

    def tensor(self, key: str, dtype: torch.dtype, shape: tuple) -> torch.Tensor:
        f = self._file(key)
        arr = f.read(key)
        t = torch.from_numpy(arr)
        if f.entries[key].dtype == "BF16":
            t = t.view(torch.bfloat16)
        return t.to(dtype) if t.dtype != dtype else t


__all__ = ["DEFER_MIN_BYTES", "DeferredWeight", "HeldWeight", "CheckpointWeight", "DeferredPayload",
           "defer_large", "Checkpoint"]
