"""Seeded mutants of a file's OPS section (one to three bytes changed): the inputs the bulk
listing and the bulk verify are checked against their line-by-line counterparts on."""
from __future__ import annotations

import random

from nac_engine.format.reader import read


def _ops_mutants(data: bytes, count: int, seed: int) -> list:
    rnd = random.Random(seed)
    ops = read(data, strict=False).spans.find("OPS")
    out = []
    for _ in range(count):
        b = bytearray(data)
        for _ in range(rnd.randrange(1, 4)):
            b[ops.offset + 8 + rnd.randrange(ops.length - 8)] = rnd.choice((0, 1, 2, 0x7F, 0x80, 0xFE, 0xFF,
                                                                             rnd.randrange(256)))
        out.append(bytes(b))
    return out
