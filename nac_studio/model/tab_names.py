"""File tab titles: the file name, and enough of its folders to tell same-named files apart.

Two ``model.nac`` from ``runs/a`` and ``runs/b`` are tabbed as ``a/model.nac`` and
``b/model.nac`` (VS Code's rule): each path gets the shortest tail of folders that no
other open path with the same name shares. Qt-free.
"""
from __future__ import annotations

from pathlib import PurePath
from typing import Sequence


def tab_titles(paths: Sequence[str]) -> list[str]:
    """A title per path, in order; unique names stay bare."""
    parts = [PurePath(p).parts for p in paths]
    out = []
    for i, p in enumerate(parts):
        name = p[-1] if p else ""
        rivals = [q for j, q in enumerate(parts) if j != i and q and q[-1] == name]
        if not rivals:
            out.append(name)
            continue
        k = 2
        while k <= len(p) and any(q[-k:] == p[-k:] for q in rivals):
            k += 1
        tail = p[-min(k, len(p)):]
        out.append("/".join(tail) if len(tail) > 1 else name)
    return out
