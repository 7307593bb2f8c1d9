"""A ``model.py`` (or a Hugging Face model's folder) given to ``nac dap`` as the program: compiled
first, then debugged.

An editor's F5 on the model's own file is the shortest way from code to a run that stops at its
lines. The compile is ``nac compile`` itself, in a process of its own: the model's code runs there
(as it would under the command), what it prints cannot reach this adapter's standard output (the
protocol's channel), and its errors are the command's one-line messages. The ``.nac`` goes beside the
model (``model.py`` -> ``model.nac``, or the launch's ``output``), where the Studio finds it too.
"""
from __future__ import annotations

import os
import subprocess
import time
from typing import Callable, Optional

from ..compiler.command import (compile_failure, default_output, is_hf_directory, model_arguments, model_file,
                                nac_process)

#: Longest a compile may take before the launch gives up (a 7B model's streaming compile is minutes).
COMPILE_TIMEOUT_S = 3600.0


class CompileFailed(Exception):
    """The model did not compile; the message is the command's error (file:line first)."""


def is_model_program(program: str) -> bool:
    """``model.py``, ``model.py:FACTORY`` or a Hugging Face model's folder."""
    return program.endswith(".py") or ".py:" in program or is_hf_directory(program)


def compile_model_program(program: str, output: Optional[str], extra: list, say: Callable[[str], None],
                          timeout: float = COMPILE_TIMEOUT_S) -> str:
    """Compile ``program`` (``model.py[:FACTORY]``, or a Hugging Face folder: ``--hf``) with ``nac
    compile`` and the ``extra`` arguments (``--quant fp16``, ``--input 1x8``, ``--seq-len 32``, ...);
    the path of the ``.nac`` written. ``say`` gets the command's notes as they are the user's to read."""
    folder = is_hf_directory(program)
    source = program if folder else model_file(program)
    if not folder and not os.path.isfile(source):
        raise CompileFailed(f"{source}: no such file")
    out = output or default_output(source)
    arguments = ["compile", *model_arguments(program), *extra, "-o", out]
    say(" ".join(["nac", *arguments]))
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
    return out
