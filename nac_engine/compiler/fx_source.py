"""Reading torch.fx nodes: the user's source line a node came from, and its arguments mapped.

Shared by the export (``export.to_graph``) and the inlining of ``torch.cond`` branches
(``control_flow``), which is why it is neither of them."""
from __future__ import annotations

import os
from typing import Any, Optional

import torch

from . import export_hints as hints

_INTERNAL_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch,))
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_internal(filename: str) -> bool:
    f = os.path.abspath(filename)
    if f.startswith(_INTERNAL_DIRS) or f.startswith(_OWN_DIR):
        return True
    # the standard library, export plumbing of other libraries and code torch generated
    # (<eval_with_key>, <string>) are not the user's code
    return f"{os.sep}contextlib.py" in f or f"{os.sep}functools.py" in f or hints.is_generated(filename)


def map_fx(value: Any, fn) -> Any:
    """Replace fx nodes inside args by ``fn(node)``."""
    if isinstance(value, torch.fx.Node):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(map_fx(v, fn) for v in value)
    if isinstance(value, list):
        return [map_fx(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_fx(v, fn) for k, v in value.items()}
    return value


def fx_source(fx) -> Optional[str]:
    """The user's source line recorded in the node's stack trace, if torch kept one: the deepest
    frame outside torch and this package (``nn.LSTM``'s own ``_VF.lstm`` call is not what the user
    wrote), else the deepest frame."""
    st = fx.meta.get("stack_trace")
    if not st:
        return None
    frames = [ln.strip() for ln in st.strip().splitlines()]
    found = []
    for i, line in enumerate(frames):
        if line.startswith('File "'):
            code = frames[i + 1] if i + 1 < len(frames) and not frames[i + 1].startswith("File") else ""
            fname, _, rest = line[6:].partition('", line ')
            found.append((fname, rest.split(",")[0], code))
    if not found:
        return None
    fname, lineno, code = next((f for f in reversed(found) if not is_internal(f[0])), found[-1])
    return f"{fname}:{lineno}: {code}"
