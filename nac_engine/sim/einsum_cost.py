"""``aten.einsum`` as the contractions it performs, for the simulator's cost model.

An einsum over two operands is one batched GEMM once its subscripts are sorted (the way
``torch.einsum`` itself lowers it to ``bmm``): a letter in both operands and the output is a
**batch** dim, in both operands but not the output a **contracted** (K) dim, in only the first
operand and the output an **M** dim, in only the second and the output an **N** dim. A letter in
one operand only and not the output is summed away before the GEMM (a vector reduction, ignored
here next to the GEMM). More operands contract left to right, each intermediate keeping the
letters a later operand or the output still needs. One operand (``"ij->ji"``, ``"ii->i"``,
``"bij->b"``) is no GEMM: :func:`einsum_gemms` returns ``[]`` and the caller costs it as a
reduction pass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

_ELLIPSIS_LETTERS = "".join(chr(c) for c in range(0x3b1, 0x3b1 + 24))   # α β γ ... for "..."


def parse_equation(equation: str, ranks: Sequence[int]) -> Optional[tuple[list[str], str]]:
    """``"bhid,bhjd->bhij"`` → (["bhid", "bhjd"], "bhij"), with ``...`` expanded to one letter
    per broadcast dim (from each operand's rank) and an implicit output (no ``->``) made
    explicit as numpy does: the letters used once, in alphabetical order, after the ellipsis."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        return None
    n_ell = 0
    for term, rank in zip(terms, ranks):
        if "..." in term:
            n_ell = max(n_ell, rank - len(term.replace("...", "")))
    if n_ell > len(_ELLIPSIS_LETTERS) or n_ell < 0:
        return None
    expanded = []
    for term, rank in zip(terms, ranks):
        if "..." in term:
            k = rank - len(term.replace("...", ""))
            if k < 0:
                return None
            term = term.replace("...", _ELLIPSIS_LETTERS[n_ell - k:n_ell])
        if len(term) != rank:
            return None
        expanded.append(term)
    if arrow:
        out = rhs.replace("...", _ELLIPSIS_LETTERS[:n_ell])
    else:
        counts: dict[str, int] = {}
        for t in expanded:
            for ch in t:
                counts[ch] = counts.get(ch, 0) + 1
        out = _ELLIPSIS_LETTERS[:n_ell] + "".join(
            sorted(ch for ch, c in counts.items() if c == 1 and ch not in _ELLIPSIS_LETTERS))
    return expanded, out


@dataclass(frozen=True)
class Gemm:
    """One matrix product: ``batch`` products of (m x k) by (k x n)."""
    m: int
    k: int
    n: int
    batch: int = 1

    @property
    def macs(self) -> int:
        return self.batch * self.m * self.k * self.n


def einsum_gemms(equation: str, shapes: Sequence[Sequence[int]]):
    """The GEMMs ``torch.einsum(equation, *operands)`` performs, as :class:`Gemm`
    records (batch, m, k, n); ``[]`` for one operand or an equation the shapes do not fit."""
    parsed = parse_equation(equation, [len(s) for s in shapes])
    if parsed is None or len(shapes) < 2:
        return []
    terms, out = parsed
    size: dict[str, int] = {}
    for term, shape in zip(terms, shapes):
        for ch, n in zip(term, shape):
            size[ch] = max(size.get(ch, 1), int(n))     # broadcast dims of 1 take the other size
    gemms = []
    left = terms[0]
    for j in range(1, len(terms)):
        right = terms[j]
        needed = set(out).union(*terms[j + 1:])
        result = "".join(ch for ch in dict.fromkeys(left + right) if ch in needed)
        batch = [ch for ch in result if ch in left and ch in right]
        m = [ch for ch in result if ch in left and ch not in right]
        n = [ch for ch in result if ch in right and ch not in left]
        k = [ch for ch in dict.fromkeys(left) if ch in right and ch not in result]
        gemms.append(Gemm(_prod(size, m), _prod(size, k), _prod(size, n), _prod(size, batch)))
        left = result
    return gemms


def _prod(size: dict, letters) -> int:
    p = 1
    for ch in letters:
        p *= size[ch]
    return p


__all__ = ["parse_equation", "einsum_gemms"]
