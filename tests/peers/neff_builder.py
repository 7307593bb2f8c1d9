"""Build NEFF files for tests: the official 1024-byte header over a (gzip'ed) tar made in memory."""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import struct
import tarfile


def header(payload: bytes, *, pkg: int = 2, name: str = "test.neff", good_hash: bool = True,
           data_size=None) -> bytes:
    h = bytearray(1024)
    struct.pack_into("<QQQQQ", h, 0, pkg, 1024, len(payload) if data_size is None else data_size, 2, 0)
    h[0xDC:0xDC + len(name)] = name.encode()
    struct.pack_into("<I", h, 0xA8, 1)
    struct.pack_into("<I", h, 0x1DC, 1)
    h[0x1E0] = 1
    struct.pack_into("<Q", h, 0x220, 0x209C00)
    struct.pack_into("<I", h, 0x228, 1)
    if good_hash:
        digest = hashlib.md5(payload).digest() if pkg == 2 else hashlib.sha256(payload).digest()
        h[0xAC:0xAC + len(digest)] = digest
    return bytes(h)


def tar_of(members: list[tuple]) -> bytes:
    """members: (TarInfo or name, bytes|None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for info, data in members:
            if isinstance(info, str):
                info = tarfile.TarInfo(info)
                info.size = len(data or b"")
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def neff(members: list[tuple], *, pkg: int = 2, **kw) -> bytes:
    tar = tar_of(members)
    payload = gzip.compress(tar, mtime=0) if pkg == 2 else tar
    return header(payload, pkg=pkg, **kw) + payload


def small_model() -> list[tuple]:
    """A one-subgraph NEFF in the shape real compiler output has (neff.json -> kelf -> def.json)."""
    import numpy as np
    graph = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                       {"op": "tvm_op", "name": "k", "attrs": {"func_name": "__kelf", "kelf": "kelf-0.json"},
                        "inputs": [[0, 0, 0]]}],
             "arg_nodes": [0], "heads": [[1, 0, 0]], "node_row_ptr": [0, 1, 2],
             "attrs": {"shape": ["list_shape", [[4, 8], [4, 8]]], "dltype": ["list_str", ["float32", "float32"]]}}
    kelf = {"graphs": [{"name": "sg00", "definition": "sg00/def.json"}], "version": "0.5", "target": "test"}
    const = io.BytesIO()
    np.save(const, np.arange(6, dtype=np.float32).reshape(2, 3))
    definition = {"pe": "PE.json", "pe_instr": "PE.bin",
                  "var": {"x": {"type": "input", "var_id": 1, "size": 128},
                          "c": {"type": "file", "var_id": 2, "size": 24, "file_name": "c.npy"}},
                  "dma_queue": {"qIn": {"type": "in", "num_queues": 1}}}
    pe_json = {"dma": [{"id": 0, "queue": "qIn", "desc": {"from": "x", "to": "SB", "from_off": 0, "to_off": 0,
                                                        "from_steps": [1], "to_steps": [1],
                                                        "from_sizes": [128], "to_sizes": [128]}}]}
    slots = bytes([0x01, 0x10] + [0] * 62) * 3 + bytes([0xA0, 0x10] + [0] * 62)
    return [("neff.json", json.dumps(graph).encode()), ("kelf-0.json", json.dumps(kelf).encode()),
            ("sg00/def.json", json.dumps(definition).encode()), ("sg00/PE.json", json.dumps(pe_json).encode()),
            ("sg00/PE.bin", slots), ("sg00/c.npy", const.getvalue())]
