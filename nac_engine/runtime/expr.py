"""A tiny, safe expression language for breakpoint conditions and watches.

Grammar (our own recursive descent; nothing is handed to ``eval`` or Python's ``ast``, so an
expression can only ever call the whitelisted tensor functions below)::

    expr  := or
    or    := and ('or' and)*
    and   := not ('and' not)*
    not   := 'not' not | cmp
    cmp   := sum (('<'|'<='|'>'|'>='|'=='|'!=') sum)?
    sum   := term (('+'|'-') term)*
    term  := unary (('*'|'/') unary)*
    unary := ('-'|'+') unary | post
    post  := atom ('[' index (',' index)* ']' | '.' METHOD '(' [expr (',' expr)*] ')' | '.shape')*
    index := expr | [expr] ':' [expr] [':' expr] | '...'
    atom  := NUMBER | NAME | FUNC '(' expr (',' expr)* ')' | '(' expr ')'

Names: ``x`` (the tick's result), ``t<N>`` or ``v<N>`` (the result of tick N, e.g. ``t12``; ``v12``
is how every view names that value), ``nan``, ``inf``,
``true``, ``false``, and the caller's ``extra_names`` — the debugger passes the file's parameter
names, so ``max(abs(fc1.weight))`` works. A dotted name is one token that must be in
``extra_names``. There is no attribute access (``x.__class__`` is an error), but what a PyTorch
user types out of habit reads as the functions: ``x.f(a)`` is ``f(x, a)`` for the functions below
(``x.abs().max()``, ``fc1.weight.mean(-1)``), ``x.size()`` and ``x.shape`` are ``shape(x)``; no
object's attributes are ever looked up. Values are torch tensors or Python numbers; reductions use the population
standard deviation (like numpy's ``std``) and compute in float64 so int tensors work too;
``mean``, ``sum``, ``std``, ``argmax`` and ``argmin`` take an optional dimension (``mean(x, -1)``).
Indexing is numpy's basic indexing with integers, slices and ``...`` (``v12[0, -1, :8]``); an
index must be a whole number.

``compile_expr("max(abs(x)) > 1e3")`` → :class:`Expr`; ``expr.evaluate(lookup)`` where
``lookup(name)`` returns the value of ``x`` / ``t<N>``. Parse errors are :class:`ExprError` with
the 1-based ``column``; evaluation errors are :class:`ExprError` with ``column=None``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable


class _Torch:
    """torch, imported when an expression is first evaluated: parsing and checking an expression
    (the Studio's breakpoint and watch editors) needs no torch."""

    def __getattr__(self, name: str):
        import torch as real
        globals()["torch"] = real
        return getattr(real, name)


torch: Any = _Torch()


class ExprError(ValueError):
    def __init__(self, message: str, column: int | None = None, text: str = ""):
        where = f" at column {column}" if column is not None else ""
        if len(text) > 80:      # a hostile condition can be megabytes: show where, not all of it
            lo = max(0, (column or 0) - 30)
            text = ("…" if lo else "") + text[lo:lo + 60] + "…"
        super().__init__(f"{message}{where}" + (f": {text!r}" if text and column is not None else ""))
        self.column = column


def _f(v):                       # reductions in float64: int/bool tensors have no mean/std
    return v.double() if isinstance(v, torch.Tensor) and not v.is_floating_point() else v


def _t(v) -> torch.Tensor:
    return v if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=torch.float64)


def _max(a, b=None):
    return torch.max(_t(a)) if b is None else torch.maximum(_t(a), _t(b))


def _min(a, b=None):
    return torch.min(_t(a)) if b is None else torch.minimum(_t(a), _t(b))


def _whole(v, what: str = "an index") -> int:
    """A Python int from an int, a whole float or a one-element integer tensor."""
    if isinstance(v, torch.Tensor):
        if v.numel() != 1 or v.is_floating_point() or v.is_complex():
            raise ExprError(f"{what} must be a whole number, not a tensor of shape {tuple(v.shape)} {v.dtype}")
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
        raise ExprError(f"{what} must be a whole number, got {v!r}")
    return int(v)


def _along(fn, **kw):
    """A reduction over everything, or along one dimension (``mean(x, -1)``)."""
    def call(a, dim=None):
        a = _t(a)
        return fn(a, **kw) if dim is None else fn(a, dim=_whole(dim, "a dimension"), **kw)
    return call


# name -> (function, min args, max args)
FUNCTIONS: dict[str, tuple[Callable, int, int]] = {
    "abs": (lambda a: torch.abs(_t(a)), 1, 1),
    "max": (_max, 1, 2),
    "min": (_min, 1, 2),
    "mean": (_along(lambda a, **k: torch.mean(_f(a), **k)), 1, 2),
    "std": (_along(lambda a, **k: torch.std(_f(a), correction=0, **k)), 1, 2),
    "sum": (_along(lambda a, **k: torch.sum(_f(a), **k)), 1, 2),
    "argmax": (_along(lambda a, **k: torch.argmax(_f(a), **k)), 1, 2),
    "argmin": (_along(lambda a, **k: torch.argmin(_f(a), **k)), 1, 2),
    "any": (lambda a: torch.any(_t(a)), 1, 1),
    "all": (lambda a: torch.all(_t(a)), 1, 1),
    "isnan": (lambda a: torch.isnan(_t(a)), 1, 1),
    "isinf": (lambda a: torch.isinf(_t(a)), 1, 1),
    "isfinite": (lambda a: torch.isfinite(_t(a)), 1, 1),
    "count_nan": (lambda a: torch.isnan(_t(a)).sum(), 1, 1),
    "count_inf": (lambda a: torch.isinf(_t(a)).sum(), 1, 1),
    "count_zero": (lambda a: (_t(a) == 0).sum(), 1, 1),
    "norm": (lambda a: torch.linalg.vector_norm(_f(_t(a)).double()), 1, 1),
    "numel": (lambda a: _t(a).numel(), 1, 1),
    "shape": (lambda a: torch.tensor(list(_t(a).shape), dtype=torch.int64), 1, 1),
    "sqrt": (lambda a: torch.sqrt(_f(_t(a))), 1, 1),
    "exp": (lambda a: torch.exp(_f(_t(a))), 1, 1),
    "log": (lambda a: torch.log(_f(_t(a))), 1, 1),
    "sin": (lambda a: torch.sin(_f(_t(a))), 1, 1),
    "cos": (lambda a: torch.cos(_f(_t(a))), 1, 1),
    "tanh": (lambda a: torch.tanh(_f(_t(a))), 1, 1),
    "sigmoid": (lambda a: torch.sigmoid(_f(_t(a))), 1, 1),
}
#: ``x.m(...)`` -> the function it stands for, ``f(x, ...)``; ``x.a`` (no call) -> ``f(x)``
METHODS = {**{name: name for name in FUNCTIONS if name != "shape"}, "size": "shape"}
ATTRIBUTES = {"shape": "shape"}
CONSTANTS = {"nan": math.nan, "inf": math.inf, "true": True, "false": False}
TICK_NAME = re.compile(r"[tv]\d+\Z")   # t12 and v12 both name tick 12's result
_TICK_NAME = TICK_NAME
_KEYWORDS = {"and", "or", "not"}

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*(?:\.[A-Za-z_0-9]+)*)
  | (?P<op><=|>=|==|!=|\.\.\.|[-+*/<>(),\[\]:.])
""", re.VERBOSE)


@dataclass(frozen=True)
class _Tok:
    kind: str        # num, name, op, bad, end
    text: str
    col: int         # 1-based


def _tokens(text: str) -> list[_Tok]:
    # A character we do not know becomes a 'bad' token instead of raising here, so the parser
    # reports the first real problem in reading order (``__import__(`` before the quote).
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            out.append(_Tok("bad", text[pos], pos + 1))
            pos += 1
            continue
        if m.lastgroup != "ws":
            out.append(_Tok(m.lastgroup, m.group(), pos + 1))
        pos = m.end()
    out.append(_Tok("end", "", len(text) + 1))
    return out


class _Parser:
    def __init__(self, text: str, extra_names: frozenset = frozenset()):
        self.extra_names = extra_names
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.names: set[str] = set()
        self.depth = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def error(self, message: str, tok: _Tok):
        raise ExprError(message, tok.col, self.text)

    def unexpected(self, tok: _Tok):
        if tok.kind == "end":
            self.error("unexpected end of expression", tok)
        what = {"bad": "character", "op": "symbol"}.get(tok.kind, "token")
        self.error(f"unexpected {what} {tok.text!r}", tok)

    def accept(self, *texts: str) -> _Tok | None:
        tok = self.peek()
        if tok.kind in ("op", "name") and tok.text in texts:
            return self.take()
        return None

    def parse(self):
        node = self.or_()
        if self.peek().kind != "end":
            self.unexpected(self.peek())
        depth = _tree_depth(node)
        if depth > MAX_TREE_DEPTH:
            raise ExprError(f"expression is {depth} operations deep; at most {MAX_TREE_DEPTH}", 0, self.text)
        return node

    def nested(self, tok: _Tok) -> None:
        """Count one level of parentheses/call/unary nesting: the parser recurses per level, and a
        hostile condition must be an ExprError, not a RecursionError."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.error(f"expression nests more than {MAX_NESTING} levels deep", tok)

    def or_(self):
        node = self.and_()
        while self.accept("or"):
            node = ("or", node, self.and_())
        return node

    def and_(self):
        node = self.not_()
        while self.accept("and"):
            node = ("and", node, self.not_())
        return node

    def not_(self):
        if (tok := self.accept("not")):
            self.nested(tok)
            node = ("not", self.not_())
            self.depth -= 1
            return node
        return self.cmp()

    def cmp(self):
        node = self.sum()
        op = self.accept("<", "<=", ">", ">=", "==", "!=")
        if op:
            node = ("cmp", op.text, node, self.sum())
            if self.peek().text in ("<", "<=", ">", ">=", "==", "!="):
                self.error("chained comparisons are not supported; use 'and'", self.peek())
        return node

    def sum(self):
        node = self.term()
        while (op := self.accept("+", "-")):
            node = ("bin", op.text, node, self.term())
        return node

    def term(self):
        node = self.unary()
        while (op := self.accept("*", "/")):
            node = ("bin", op.text, node, self.unary())
        return node

    def unary(self):
        if (tok := self.accept("-", "+")):
            self.nested(tok)
            node = self.unary()
            self.depth -= 1
            return ("neg", node) if tok.text == "-" else node
        node = self.atom()
        while self.peek().text in ("[", "."):
            if self.peek().text == "[":
                node = self.subscript(node)
                continue
            dot = self.take()
            name = self.take()
            if name.kind != "name":
                self.error("expected a method or 'shape' after '.'", name if name.kind != "end" else dot)
            node = self.members(node, name.text, name.col)
        return node

    def members(self, node, dotted: str, col: int):
        """``node.a.b`` (one dotted name token, the last member possibly called)."""
        parts = dotted.split(".")
        for k, name in enumerate(parts):
            node = self.member(node, _Tok("name", name, col), k == len(parts) - 1)
            col += len(name) + 1
        return node

    def member(self, node, name: _Tok, last: bool):
        """``node.name(...)`` or ``node.name``: only the functions' sugar (see the module docstring)."""
        if last and self.peek().text == "(":
            if name.text not in METHODS:
                self.error(f"no method {name.text!r}: the methods are the functions "
                           f"({', '.join(sorted(METHODS))}); x.f(a) means f(x, a)", name)
            return self.call(_Tok("name", METHODS[name.text], name.col), first=node)
        if name.text not in ATTRIBUTES:
            hint = "; call it: x.f() means f(x)" if name.text in METHODS else ""
            self.error(f"values have no attribute {name.text!r} (only shape, and the functions as methods)"
                       f"{hint}", name)
        return ("call", ATTRIBUTES[name.text], [node])

    def subscript(self, node):
        self.nested(self.take())                      # '['
        items = []
        while True:
            tok = self.peek()
            items.append(self.index())
            if items[-1] == ("ellipsis",) and items.count(("ellipsis",)) > 1:
                self.error("an index can have only one '...'", tok)
            if not self.accept(","):
                break
        if not self.accept("]"):
            self.error("expected ']' or ','", self.peek())
        self.depth -= 1
        return ("index", node, items)

    def index(self):
        if self.accept("..."):
            return ("ellipsis",)
        parts = [None if self.peek().text in (":", ",", "]") else self.or_()]
        if not self.accept(":"):
            if parts[0] is None:
                self.error("expected an index", self.peek())
            return parts[0]
        parts.append(None if self.peek().text in (":", ",", "]") else self.or_())
        if self.accept(":"):
            parts.append(None if self.peek().text in (",", "]") else self.or_())
        return ("slice", *parts, *[None] * (3 - len(parts)))

    def atom(self):
        tok = self.take()
        if tok.kind == "num":
            return ("num", float(tok.text) if any(c in tok.text for c in ".eE") else int(tok.text))
        if tok.kind == "op" and tok.text == "(":
            self.nested(tok)
            node = self.or_()
            if not self.accept(")"):
                self.error("expected ')'", self.peek())
            self.depth -= 1
            return node
        if tok.kind == "name" and tok.text not in _KEYWORDS:
            if self.peek().text == "(" and tok.text in FUNCTIONS:
                return self.call(tok)
            split = self.value_and_members(tok.text)
            if split is not None:
                head, rest = split
                self.names.add(head)
                return self.members(("var", head), rest, tok.col + len(head) + 1) if rest else ("var", head)
            if self.peek().text == "(":
                return self.call(tok)
            if "." in tok.text and not self.extra_names:
                self.error("attribute access is not allowed", _Tok("op", ".", tok.col + tok.text.index(".")))
            if tok.text in CONSTANTS:
                return ("num", CONSTANTS[tok.text])
            self.error(f"unknown name {tok.text!r} (names: x, t<N> or v<N>, nan, inf, true, false"
                       + (", parameter names" if self.extra_names else "") + ")", tok)
        self.unexpected(tok)

    def value_and_members(self, dotted: str):
        """``(value name, "member.member")`` of a dotted name token whose longest leading part
        names a value (``fc1.weight.abs`` with parameter ``fc1.weight``: ``abs``), else None."""
        parts = dotted.split(".")
        for k in range(len(parts), 0, -1):
            head = ".".join(parts[:k])
            if head == "x" or _TICK_NAME.match(head) or head in self.extra_names:
                return head, ".".join(parts[k:])
        return None

    def call(self, name: _Tok, first=None):
        """``name(args)``; ``first``: the value a method was called on, its first argument."""
        if name.text not in FUNCTIONS:
            self.error(f"unknown function {name.text!r} (known: {', '.join(sorted(FUNCTIONS))})", name)
        self.nested(self.take())                      # '('
        args = [] if first is None else [first]
        if first is None or self.peek().text != ")":
            args.append(self.or_())
            while self.accept(","):
                args.append(self.or_())
        if not self.accept(")"):
            self.error("expected ')' or ','", self.peek())
        _, lo, hi = FUNCTIONS[name.text]
        if not lo <= len(args) <= hi:
            if first is not None:       # as the method reads: x.mean(0) has one argument, not two
                lo, hi, got = lo - 1, hi - 1, len(args) - 1
            else:
                got = len(args)
            n = str(lo) if lo == hi else f"{lo} or {hi}"
            self.error(f"{name.text}() takes {n} argument(s), got {got}", name)
        self.depth -= 1
        return ("call", name.text, args)


#: Parentheses, calls and unary operators nested deeper than this are refused (each level costs the
#: recursive-descent parser about eight Python frames).
MAX_NESTING = 64
#: Evaluation recurses once per tree level; a flat ``1+1+...`` chain is as deep as it is long.
MAX_TREE_DEPTH = 256


def _tree_depth(root) -> int:
    """Depth of a parsed tree, walked with an explicit stack (no recursion on hostile input)."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        for child in node[1:]:
            if isinstance(child, tuple):
                stack.append((child, d + 1))
            elif isinstance(child, list):
                stack.extend((c, d + 1) for c in child if isinstance(c, tuple))
    return deepest


def _truth(v) -> bool:
    if isinstance(v, torch.Tensor):
        if v.numel() != 1:
            raise ExprError(f"a tensor of shape {tuple(v.shape)} has no single truth value; "
                            f"use any() or all()")
        return bool(v.item())
    return bool(v)


def _scalar(v) -> bool:
    return not isinstance(v, torch.Tensor) or v.numel() == 1


def _logic(op: str, a, b):
    if _scalar(a) and _scalar(b):
        return (_truth(a) and _truth(b)) if op == "and" else (_truth(a) or _truth(b))
    fn = torch.logical_and if op == "and" else torch.logical_or
    return fn(_t(a).bool(), _t(b).bool())


_CMP = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def _arith(op: str, a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return {"+": torch.add, "-": torch.sub, "*": torch.mul, "/": torch.true_divide}[op](_t(a), _t(b))
    if op == "/":                               # IEEE, not ZeroDivisionError
        return float(torch.tensor(float(a), dtype=torch.float64) / float(b))
    return {"+": a + b, "-": a - b, "*": a * b}[op]


class Expr:
    """A parsed expression. ``names``: the variables it reads (``x``, ``t12`` …)."""

    def __init__(self, text: str, extra_names=()):
        parser = _Parser(text, frozenset(extra_names))
        self.text = text
        self.tree = parser.parse()
        self.names = frozenset(parser.names)

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"

    def evaluate(self, lookup: Callable[[str], Any]) -> Any:
        """Value of the expression; ``lookup(name)`` supplies ``x`` / ``t<N>``."""
        try:
            return self._eval(self.tree, lookup)
        except ExprError:
            raise
        except Exception as e:
            raise ExprError(f"{self.text!r}: {type(e).__name__}: {e}") from e

    def test(self, lookup: Callable[[str], Any]) -> bool:
        """Truth of the expression, for conditions (a multi-element tensor is an error)."""
        return _truth(self.evaluate(lookup))

    def _eval(self, node, lookup):
        kind = node[0]
        if kind == "num":
            return node[1]
        if kind == "var":
            v = lookup(node[1])
            if v is None:
                raise ExprError(f"{node[1]} has no value")
            return v if isinstance(v, (torch.Tensor, bool, int, float)) else torch.as_tensor(v)
        if kind == "neg":
            return -self._eval(node[1], lookup)
        if kind == "not":
            v = self._eval(node[1], lookup)
            return (not _truth(v)) if _scalar(v) else torch.logical_not(v.bool())
        if kind in ("and", "or"):
            a = self._eval(node[1], lookup)
            if _scalar(a) and (_truth(a) if kind == "or" else not _truth(a)):
                return _truth(a)                      # short-circuit like Python
            return _logic(kind, a, self._eval(node[2], lookup))
        if kind == "cmp":
            return _CMP[node[1]](self._eval(node[2], lookup), self._eval(node[3], lookup))
        if kind == "bin":
            return _arith(node[1], self._eval(node[2], lookup), self._eval(node[3], lookup))
        if kind == "call":
            return FUNCTIONS[node[1]][0](*[self._eval(a, lookup) for a in node[2]])
        if kind == "index":
            return self._index(self._eval(node[1], lookup), node[2], lookup)
        raise AssertionError(kind)

    def _index(self, value, items, lookup):
        if not isinstance(value, torch.Tensor) or value.dim() == 0:
            raise ExprError("only a tensor with dimensions can be indexed")
        key = []
        for item in items:
            if item == ("ellipsis",):
                key.append(Ellipsis)
            elif isinstance(item, tuple) and item[0] == "slice":
                bounds = [None if b is None else _whole(self._eval(b, lookup), "a slice bound") for b in item[1:]]
                if bounds[2] is not None and bounds[2] <= 0:
                    raise ExprError(f"a slice step must be positive, got {bounds[2]}")
                key.append(slice(*bounds))
            else:
                key.append(_whole(self._eval(item, lookup)))
        dims = sum(1 for k in key if k is not Ellipsis)
        if dims > value.dim():
            raise ExprError(f"{dims} indices for a tensor of {value.dim()} dimension(s), shape {tuple(value.shape)}")
        for d, k in zip(_dims_of(key, value.dim()), key):
            if isinstance(k, int) and not -value.shape[d] <= k < value.shape[d]:
                raise ExprError(f"index {k} is out of range for dimension {d} of size {value.shape[d]}")
        return value[tuple(key)]


def _dims_of(key: list, ndim: int) -> list:
    """The tensor dimension each index of ``key`` addresses (``...`` stands for the ones left)."""
    if Ellipsis not in key:
        return list(range(len(key)))
    e = key.index(Ellipsis)
    after = len(key) - e - 1
    return list(range(e)) + [None] + list(range(ndim - after, ndim))


#: The name being typed at the cursor (a dotted parameter name included).
_PARTIAL = re.compile(r"[A-Za-z_][A-Za-z_0-9.]*\Z")
#: Completions one request lists at most (a 7B model has ~300 parameters).
COMPLETIONS_MAX = 500


def completions(text: str, cursor: int, names=()) -> tuple[int, list[tuple[str, str]]]:
    """What may be typed at ``cursor`` of ``text`` (a debug console's or watch's completion):
    ``(start, [(candidate, kind), ...])`` where the candidate replaces ``text[start:cursor]``;
    kind is ``function`` (inserted with its ``(``), ``value`` (``x`` and the constants) or
    ``variable`` (``names``: the caller's parameter and tick names). Nothing inside a number
    (``1e3``)."""
    head = text[:max(0, min(cursor, len(text)))]
    m = _PARTIAL.search(head, max(0, len(head) - 1024))     # a name is short: the search stays linear
    prefix = m.group(0) if m else ""
    start = len(head) - len(prefix)
    if start and head[start - 1] == "." and head[:start - 1].rstrip()[-1:] in (")", "]"):
        return start, _members(prefix)                     # x.abs().m|
    if start and (head[start - 1].isdigit() or head[start - 1] == "."):
        return len(head), []
    base, _, part = prefix.rpartition(".")
    if base and (base == "x" or TICK_NAME.match(base) or base in set(names)):
        return start + len(base) + 1, _members(part)        # x.me|, fc1.weight.ab|
    found = [(f + "(", "function") for f in sorted(FUNCTIONS) if f.startswith(prefix)]
    found += [(v, "value") for v in ("x", *CONSTANTS) if v.startswith(prefix) and v != prefix]
    found += [(n, "variable") for n in sorted(set(names)) if n.startswith(prefix) and n != prefix]
    return start, found[:COMPLETIONS_MAX]


def _members(prefix: str) -> list[tuple[str, str]]:
    found = [(m + "(", "function") for m in sorted(METHODS) if m.startswith(prefix)]
    return found + [(a, "value") for a in sorted(ATTRIBUTES) if a.startswith(prefix) and a != prefix]


def compile_expr(text: str, extra_names=()) -> Expr:
    return Expr(text, extra_names)


def to_python(v: Any) -> Any:
    """A watch value for display: single-element tensors → Python numbers."""
    if isinstance(v, torch.Tensor):
        return v.item() if v.numel() == 1 else v.detach().cpu().numpy()
    return v
