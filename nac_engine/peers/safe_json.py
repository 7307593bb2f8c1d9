"""JSON from untrusted bytes: bounded size and nesting, one error type.

``json.loads`` recurses per nesting level, so a 100k-deep ``[[[[...`` would end in a
``RecursionError``; the depth is measured first with an iterative scan (strings skipped), and
anything wrong becomes a :class:`~nac_engine.errors.NacFormatError` naming where it came from.
"""
from __future__ import annotations

import json
from typing import Any

from ..errors import NacFormatError

MAX_JSON_BYTES = 64 << 20
MAX_JSON_DEPTH = 128


def json_depth(text: str) -> int:
    """Deepest nesting of ``[``/``{`` outside strings (iterative, linear)."""
    depth = deepest = 0
    in_str = escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch in "]}":
            depth -= 1
    return deepest


def load_json(data: bytes, section: str, offset: int = 0, *, max_bytes: int = MAX_JSON_BYTES,
              max_depth: int = MAX_JSON_DEPTH) -> Any:
    if len(data) > max_bytes:
        raise NacFormatError(section, offset, f"JSON of {len(data):,} bytes is over the {max_bytes:,}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NacFormatError(section, offset + e.start, "JSON is not UTF-8") from None
    depth = json_depth(text)
    if depth > max_depth:
        raise NacFormatError(section, offset, f"JSON nested {depth} deep (limit {max_depth})")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise NacFormatError(section, offset, f"not valid JSON: {str(e)[:200]}") from None
