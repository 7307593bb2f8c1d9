"""JSON from untrusted bytes (a safetensors header's quantisation entry, a tokenizer in RSRC,
a tokenizer_config.json) decoded in bounded time, memory and stack.

``json.loads`` recurses once per nesting level, so ``[[[[...]]]]`` a few thousand deep raises
``RecursionError`` (or exhausts the C stack) instead of a format error. The depth is measured
first with a linear, non-recursive scan (strings blanked by one regex, brackets summed by
numpy), and anything deeper than ``max_depth`` is refused before the parser sees it.
"""
from __future__ import annotations

import json
import re
from typing import Any, Union

import numpy as np

#: Deeper than any real tokenizer/config (Hugging Face files nest about 6 levels).
MAX_DEPTH = 64

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)


def nesting_depth(data: Union[str, bytes]) -> int:
    """Deepest ``[``/``{`` nesting outside strings; linear in the input."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    blanked = _STRING.sub(b'""', raw)
    step = _STEP[np.frombuffer(blanked, np.uint8)]
    step = step[step != 0]
    return int(np.cumsum(step, dtype=np.int64).max(initial=0)) if step.size else 0


_STEP = np.zeros(256, np.int8)
_STEP[[0x5B, 0x7B]] = 1      # [ {
_STEP[[0x5D, 0x7D]] = -1     # ] }


def loads(data: Union[str, bytes], what: str = "JSON", max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that raises ``ValueError`` naming ``what`` for bad or too-deep input."""
    depth = nesting_depth(data)
    if depth > max_depth:
        raise ValueError(f"{what} nests {depth} levels deep; at most {max_depth} are accepted")
    try:
        return json.loads(data)
    except (ValueError, TypeError) as e:     # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"{what} is not valid JSON: {str(e)[:200]}") from None
    except RecursionError:                   # depth is bounded above; kept as a last guard
        raise ValueError(f"{what} nests too deeply") from None
