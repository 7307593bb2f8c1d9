"""JSON from a peer file's untrusted bytes as the peers' one error type.

The bounded parse itself (size, then nesting measured by a linear scan before ``json.loads``
recurses) is :mod:`nac_engine.format.bounded_json`'s; this adds the byte limit and turns its
``ValueError`` into a :class:`~nac_engine.errors.NacFormatError` naming section and offset.
"""
from __future__ import annotations

from typing import Any

from ..errors import NacFormatError
from ..format.bounded_json import loads

MAX_JSON_BYTES = 64 << 20
MAX_JSON_DEPTH = 128


def load_json(data: bytes, section: str, offset: int = 0, *, max_bytes: int = MAX_JSON_BYTES,
              max_depth: int = MAX_JSON_DEPTH) -> Any:
    if len(data) > max_bytes:
        raise NacFormatError(section, offset, f"JSON of {len(data):,} bytes is over the {max_bytes:,}-byte limit")
    try:
        return loads(data, "JSON", max_depth=max_depth)
    except ValueError as e:
        raise NacFormatError(section, offset, str(e)) from None
