"""Numbers of the container layout: header generations, section slots, type codes.

Facts from seed 000 (v1.6) and the reference writer's v1.7/v1.8 layouts
(research note upstream_format.md §2, §10, §14, §15).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

MAGIC = b"NAC"


@dataclass(frozen=True)
class HeaderLayout:
    version: str            # "1.6", "1.7", "1.8"
    version_byte: int
    size: int               # header bytes
    slots: tuple            # section tag (without padding) per offset-table slot
    default_order: tuple    # physical order the reference writer uses for new files
    quant_mask: int         # bits of byte 4 that hold the quantisation method
    trng_flag: int          # bit of byte 4 that says TRNG is present (0 = none)


V16 = HeaderLayout("1.6", 1, 88,
                   ("MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "PROC", "ORCH", "RSRC"),
                   ("MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "PROC", "RSRC", "ORCH"),
                   0x7F, 0)
V17 = HeaderLayout("1.7", 2, 92,
                   ("MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "PROC", "ORCH", "TRNG", "RSRC"),
                   ("MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "PROC", "ORCH", "TRNG", "RSRC"),
                   0x3F, 0x40)
V18 = HeaderLayout("1.8", 2, 100,
                   ("MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "PROC", "ORCH", "TRNG", "RSRC", "ARRS"),
                   ("MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "PROC", "ORCH", "TRNG", "RSRC", "ARRS"),
                   0x3F, 0x40)
LAYOUTS = {"1.6": V16, "1.7": V17, "1.8": V18}
DEFAULT_VERSION = "1.6"

# Sections every writer of a version emits even when empty (the reference writer does).
ALWAYS_WRITTEN = {"1.6": ("MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "ORCH"),
                  "1.7": ("MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "ORCH"),
                  "1.8": ("MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "ORCH", "ARRS")}


def tag_bytes(name: str) -> bytes:
    return name.ljust(4).encode("ascii")


STORAGE_INTERNAL = 0x80

QUANT_NONE, QUANT_FP16, QUANT_INT8_TENSOR, QUANT_INT8_CHANNEL, QUANT_BLOCK_FP8 = range(5)
QUANT_NAMES = {0: "none", 1: "FP16", 2: "INT8_TENSOR", 3: "INT8_CHANNEL", 4: "BLOCK_FP8"}
QUANT_CODES = {v.lower(): k for k, v in QUANT_NAMES.items()}

# DATA block 3 / ARRS dtype codes (seed 000 §6.1.1). 255 is what the reference writes
# for a dtype it has no code for.
DTYPE_NAMES = {0: "float32", 1: "float64", 2: "float16", 3: "bfloat16", 4: "int32",
               5: "int64", 6: "int16", 7: "int8", 8: "uint8", 9: "bool"}
DTYPE_CODES = {v: k for k, v in DTYPE_NAMES.items()}
DTYPE_UNKNOWN = 255
# bfloat16 has no numpy dtype: stored as its raw 16 bits.
NUMPY_STORAGE = {0: "<f4", 1: "<f8", 2: "<f2", 3: "<u2", 4: "<i4", 5: "<i8", 6: "<i2", 7: "i1", 8: "u1", 9: "?"}


@functools.lru_cache(maxsize=256)      # called per tensor by verify and the readers (25k in a file)
def storage_dtype(code: int) -> np.dtype:
    return np.dtype(NUMPY_STORAGE.get(code, "u1"))


def dtype_name(code: int) -> str:
    return DTYPE_NAMES.get(code, f"dtype{code}")


# CNST / ORCH pool record types (seed 000 §5.3.2)
CONST_NULL, CONST_BOOL, CONST_INT64, CONST_FLOAT64, CONST_STRING, CONST_LIST_I32, CONST_LIST_F32 = range(7)
CONST_TYPE_NAMES = {0: "null", 1: "bool", 2: "int64", 3: "float64", 4: "str", 5: "list_i32", 6: "list_f32"}
CONST_TYPE_CODES = {v: k for k, v in CONST_TYPE_NAMES.items()}

# MMAP actions (seed 000 §4.5); 15 and 25 are named by the v1.8 writer but never generated.
MMAP_SAVE_RESULT, MMAP_FREE, MMAP_FORWARD, MMAP_PRELOAD = 10, 20, 30, 40
MMAP_ACTION_NAMES = {10: "SAVE_RESULT", 15: "SAVE_FOR_GRAD", 20: "FREE", 25: "FREE_AFTER_TRNG",
                     30: "FORWARD", 40: "PRELOAD"}
MMAP_ACTION_CODES = {v: k for k, v in MMAP_ACTION_NAMES.items()}
