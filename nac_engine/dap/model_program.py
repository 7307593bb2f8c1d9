"""A ``model.py`` (or a Hugging Face model's folder) given to ``nac dap`` as the program: compiled
first, then debugged.

An editor's F5 on the model's own file is the shortest way from code to a run that stops at its
lines. The compile is ``nac compile`` itself, in a process of its own: the model's code runs there
(as it would under the command), what it prints cannot reach this adapter's standard output (the
protocol's channel), and its errors are the command's one-line messages. The ``.nac`` goes beside the
model (``model.py`` -> ``model.nac``, or the launch's ``output``), where the Studio finds it too.

A launch whose ``.nac`` is up to date is not compiled again, as a build tool would skip it: each
compile is recorded in a small JSON file in the user's cache folder (``nac/dap-compiles.json``): the
arguments, when it started, and the size and time of what it wrote (the ``.nac``, and its external
``.safetensors`` if any). The next launch with the same arguments reuses the file when nobody has
rewritten those and no source is newer than that compile: the model file and the other ``.py``
files beside it (its sibling modules), or every file of a Hugging Face folder. Code imported from
elsewhere is not watched; ``"recompile": true`` compiles again whatever the record says.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Callable, Optional

from ..compiler.command import (compile_failure, default_output, is_hf_directory, model_arguments, model_file,
                                model_sources, nac_process)

#: Longest a compile may take before the launch gives up (a 7B model's streaming compile is minutes).
COMPILE_TIMEOUT_S = 3600.0
#: Compiles remembered for the up-to-date check (the oldest are forgotten), and the record's size limit.
RECORDS_MAX = 64
RECORD_BYTES_MAX = 1 << 20


class CompileFailed(Exception):
    """The model did not compile; the message is the command's error (file:line first)."""


def is_model_program(program: str) -> bool:
    """``model.py``, ``model.py:FACTORY`` or a Hugging Face model's folder."""
    return program.endswith(".py") or ".py:" in program or is_hf_directory(program)


def compile_model_program(program: str, output: Optional[str], extra: list, say: Callable[[str], None],
                          timeout: float = COMPILE_TIMEOUT_S, recompile: bool = False) -> str:
    """Compile ``program`` (``model.py[:FACTORY]``, or a Hugging Face folder: ``--hf``) with ``nac
    compile`` and the ``extra`` arguments (``--quant fp16``, ``--input 1x8``, ``--seq-len 32``, ...);
    the path of the ``.nac`` written. ``say`` gets the command's notes as they are the user's to read.
    An up-to-date ``.nac`` (module docstring) is reused unless ``recompile``."""
    folder = is_hf_directory(program)
    source = program if folder else model_file(program)
    if not folder and not os.path.isfile(source):
        raise CompileFailed(f"{source}: no such file")
    out = output or default_output(source)
    arguments = ["compile", *model_arguments(program), *extra, "-o", out]
    key = os.path.abspath(out)
    if not recompile and _up_to_date(key, arguments, source):
        say(f"{os.path.basename(out)} is up to date with {os.path.basename(source.rstrip('/'))} "
            f"(same nac compile arguments, no source changed since): not compiled again; "
            f"\"recompile\": true in the launch configuration compiles it anyway")
        return out
    say(" ".join(["nac", *arguments]))
    began = time.time()
    started = time.perf_counter()
    try:
        done = subprocess.run(nac_process(arguments), capture_output=True, text=True, timeout=timeout,
                              cwd=os.path.dirname(os.path.abspath(source)), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise CompileFailed(f"compiling {program} took longer than {timeout:.0f} s") from None
    for line in done.stderr.splitlines():
        if line.startswith("nac: note: "):
            say(line[len("nac: "):])
    if done.returncode != 0:
        message = compile_failure(done.stderr, done.returncode)
        if "--input SHAPE" in message:      # said in the command's words; here it is a launch argument
            message += ' (in the launch configuration: "compileArgs": ["--input", "1x3x32x32"], one per input)'
        raise CompileFailed(message)
    say(f"compiled {os.path.basename(source.rstrip('/'))} in {time.perf_counter() - started:.1f} s: {done.stdout.strip()}")
    _remember(key, arguments, began)
    return out


def _records_path() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nac", "dap-compiles.json")


def _records() -> dict:
    """The remembered compiles (empty when there are none or the file is not ours to trust)."""
    from ..format import bounded_json
    try:
        with open(_records_path(), "rb") as fh:
            data = bounded_json.loads(fh.read(RECORD_BYTES_MAX + 1) or b"{}", what="nac dap's compile records")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _outputs(key: str) -> list[str]:
    """What a compile to ``key`` writes: the .nac, and its external weights when it has them."""
    return [key, os.path.splitext(key)[0] + ".safetensors"]


def _written(key: str) -> list:
    """(size, time) of each output, None for one that does not exist."""
    def stamp(path: str):
        try:
            st = os.stat(path)
        except OSError:
            return None
        return [st.st_size, st.st_mtime_ns]
    return [stamp(p) for p in _outputs(key)]


def _up_to_date(key: str, arguments: list, source: str) -> bool:
    record = _records().get(key)
    if not isinstance(record, dict) or record.get("arguments") != arguments:
        return False
    if _written(key) != record.get("written") or not os.path.isfile(key):
        return False                  # rewritten or removed since (another compile, a copy, nac rewrite)
    began = record.get("began")
    if not isinstance(began, (int, float)):
        return False
    # a source saved during the compile may not be in the file: only ones older than its start count
    outputs = set(_outputs(key))      # (written inside the Hugging Face folder they came from)
    try:
        return all(os.stat(p).st_mtime < began for p in model_sources(source) if os.path.abspath(p) not in outputs)
    except OSError:
        return False


def _remember(key: str, arguments: list, began: float) -> None:
    """Record a compile (a cache that cannot be written only costs the next launch a compile)."""
    from ..format.writer import atomic_write
    records = _records()
    records.pop(key, None)
    records[key] = {"arguments": arguments, "began": began, "written": _written(key)}
    while len(records) > RECORDS_MAX:
        records.pop(next(iter(records)))
    path = _records_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, json.dumps(records).encode())
    except OSError:
        pass
