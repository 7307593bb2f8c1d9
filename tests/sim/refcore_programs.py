"""The reference-core probe programs of research note upstream_hardware.md §7.1, built with
the codec: P0, P1 (+ its schedule M1) and P_OPS, with the OPS bytes the note gives."""
from __future__ import annotations

from nac_engine.format.model import Header, Instruction, MmapCommand, MmapRecord, NacFile

# §7.1 program bytes (OPS order, after the tag and count), hex
P0_HEX = "020100000700" "0300020000 00ffff".replace(" ", "")
P1_HEX = "0200" "020101000500" "0b01feffffff" "1601fffffeff" "0300020000 00ffff".replace(" ", "")

# harness tables: PERM 1 → arity 2, 2 → arity 1, 3 → arity 2 with constants;
# op table A=40 LAYERNORM, 41 SOFTMAX, 42 CONV2D, 43 ELEMWISE/HSWISH
PERMS = {1: "TT", 2: "T", 3: "TTi"}
CMAP = {40: "aten.layer_norm.default", 41: "aten.softmax.int", 42: "aten.convolution.default",
        43: "aten.hardswish.default"}


def _file(instrs: list, mmap: list = ()) -> NacFile:
    nac = NacFile(Header(version="1.8", num_inputs=1, num_outputs=1))
    nac.perms = dict(PERMS)
    nac.cmap = dict(CMAP)
    nac.instructions = [Instruction(i, a, b, c, d) for i, (a, b, c, d) in enumerate(instrs)]
    nac.mmap = list(mmap)
    return nac


def p0(mmap: list = ()) -> NacFile:
    return _file([(2, 1, (0, 7), None), (3, 0, (2, 0), (-1,))], mmap)


def p1(mmap: list = ()) -> NacFile:
    return _file([(2, 0, None, None), (2, 1, (1, 5), None), (11, 1, None, (-2, -1)),
                  (22, 1, None, (-1, -2)), (3, 0, (2, 0), (-1,))], mmap)


def m1() -> list:
    return [MmapRecord(0, [MmapCommand(40, 1)]), MmapRecord(2, [MmapCommand(30, 3)]),
            MmapRecord(3, [MmapCommand(20, 1), MmapCommand(10, 7)])]


P_OPS_SEQUENCE = [(10, 2), (11, 1), (12, 1), (13, 1), (14, 2), (16, 2), (17, 2), (18, 1), (20, 1), (22, 1),
                  (40, 2), (41, 2), (42, 1), (43, 2)]


def p_ops() -> NacFile:
    instrs = [(2, 0, None, None)]
    for a, b in P_OPS_SEQUENCE:
        instrs.append((a, b, None, (-1, -2) if b == 1 else (-1,)))
    instrs.append((3, 0, (2, 0), (-1,)))
    return _file(instrs)


def ops_bytes(nac: NacFile) -> bytes:
    """The OPS bytes as the codec writes them (encode, read back, slice the instructions)."""
    from nac_engine.format import read
    from nac_engine.format.writer import encode
    import os
    import tempfile
    data = encode(nac)
    fd, path = tempfile.mkstemp(suffix=".nac")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        with read(path) as back:
            first, last = back.instructions[0], back.instructions[-1]
            return bytes(data[first.offset:last.offset + last.nbytes])
    finally:
        os.unlink(path)
