"""TVMR's fixed parts: magic numbers, header sizes, and the two checksums a file may carry.

The checksum covers ext table ‖ register definitions ‖ instructions. The seed names xxhash64;
the real writer (``binary.rs``) computes a rotate-multiply hash. The reader and the assembler
both need these, and neither needs the other for them."""
from __future__ import annotations

import array
import sys

import xxhash

MAGIC = b"TVMR"
LEGACY_MAGIC = b"TERN"
HEADER_SIZE = 48
LEGACY_HEADER_SIZE = 32
MASK64 = (1 << 64) - 1


def tvmr_hash(payload: bytes) -> int:
    """The checksum ``binary.rs`` writes: h = rotl64(h*0x85EBCA6B + v, 31) over 8-byte LE chunks
    (the last zero-padded), from h = 0x9E3779B97F4A7C15, wrapping mod 2**64."""
    h = 0x9E3779B97F4A7C15
    n = len(payload)
    words = array.array("Q", payload + b"\0" * (-n % 8))   # plain ints without a tuple per word
    if sys.byteorder != "little":
        words.byteswap()
    mask = MASK64
    for v in words:
        h = (h * 0x85EBCA6B + v) & mask
        h = ((h << 31) & mask) | (h >> 33)
    return h


def xxh64(payload: bytes) -> int:
    """What the seed says the checksum is: xxhash64 (seed 0) of the same bytes."""
    return xxhash.xxh64_intdigest(payload)


CHECKSUMS = {"tvmr-binary.rs": tvmr_hash, "xxh64": xxh64}
