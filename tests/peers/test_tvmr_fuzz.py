"""TVMR hostile input: mutants of every sample (bit flips, byte sets, cuts, splices, header fields
set to extremes) give problems of the one error type, never another exception, a hang or an
allocation beyond what the file allows; a mutant that decodes clean in the writer's layout still
disassembles and reassembles byte-identically, and the interpreter fails only with its own error."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from nac_engine.errors import NacFormatError
from nac_engine.peers import tvmr
from nac_engine.peers.tvmr.asm import assemble
from nac_engine.peers.tvmr.interp import TvmrMachine, TvmrRuntimeError
from tests.peers.test_tvmr import SAMPLES, legacy_writer_file
from tests.peers.test_tvmr_asm import SOURCE

_FIELDS = (8, 12, 16, 20, 24, 28)


def _bases() -> list[bytes]:
    return [p.read_bytes() for p in SAMPLES] + [assemble(SOURCE), legacy_writer_file()]


def _mutants(base: bytes, n: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        b = bytearray(base)
        kind = rng.integers(6)
        if kind == 0:
            for _ in range(rng.integers(1, 4)):
                p = rng.integers(len(b))
                b[p] ^= 1 << int(rng.integers(8))
        elif kind == 1:
            p = rng.integers(len(b))
            b[p] = int(rng.choice([0, 0xFF, 0x7F, 0x80, 1]))
        elif kind == 2:
            del b[rng.integers(len(b)):]
        elif kind == 3:
            off = int(rng.choice(_FIELDS))
            b[off:off + 4] = struct.pack("<I", int(rng.choice([0, 1, 47, 48, len(b), 0x7FFFFFFF, 0xFFFFFFFF,
                                                               rng.integers(0, 1 << 32)])))
        elif kind == 4:
            p = rng.integers(len(b))
            b[p:p] = rng.integers(0, 256, rng.integers(1, 24), dtype=np.uint8).tobytes()
        else:
            p = 48 + rng.integers(max(1, len(b) - 48))
            b[p:p + 8] = rng.integers(0, 256, 8, dtype=np.uint8).tobytes()
        yield bytes(b)


def _check(m: bytes, run_it: bool) -> None:
    f = tvmr.decode(m)
    f.summary()
    f.format_summary()
    f.graph()
    problems = f.verify()
    text = f.disassemble()
    errors = [p for p in f.problems if getattr(p, "severity", "error") == "error"]
    h = f.header
    canonical = (not f.legacy and not errors and h.ext_offset == 48 and h.reg_offset == 48 + 8 * h.ext_count
                 and h.reserved == b"\0" * 8 and h.instr_offset + 8 * h.instr_count == f.size)
    if canonical:
        assert assemble(text) == m, "a clean mutant must round-trip"
    assert all(isinstance(p, NacFormatError) for p in problems)
    if run_it and not errors:
        try:
            TvmrMachine(f, seed=1).run(max_steps=5_000)
        except TvmrRuntimeError:
            pass


def _fuzz(n: int, seed: int) -> None:
    bases = _bases()
    k = 0
    for base in bases:
        for m in _mutants(base, n // len(bases), seed + len(base)):
            k += 1
            _check(m, run_it=k % 10 == 0)


pytestmark = pytest.mark.skipif(not SAMPLES, reason="shared corpus absent")


def test_fuzz_slice():
    _fuzz(1_500, 1)


@pytest.mark.slow
def test_fuzz_100k():
    _fuzz(102_000, 2)
