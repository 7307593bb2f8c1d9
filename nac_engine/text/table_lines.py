"""``.const``, ``.param`` and ``.tensor`` lines of a listing, made a block at a time.

A table of 65k constants or 25k parameters is mostly records of one shape: a block of plain
records is one comprehension of f-strings with the tests done once for the block (are all the
names bare? are all the constants of a type without ``len=``?), and a block holding anything
else (a null or bool constant, a name that needs quoting) goes record by record through the
disassembler's own formatters, so the text is the same either way. Lines are yielded joined
in blocks, not one by one.
"""
from __future__ import annotations

import re
from operator import attrgetter
from typing import Callable, Iterable

from ..format import layout as L
from ..format.model import NacFile
from .literals import format_name

BLOCK = 4096      # lines per yielded block

# Every name is bare (format_name leaves it as it is) when the names joined by NUL (which no
# name holds: counted) are all bare-name characters (no newline: format_name's own test lets a
# trailing "\n" through, such names go one by one), no part is empty or starts with another
# character, and none is one of the three words it quotes. Character classes only: a repeated
# group would make the regex engine keep a backtracking state per name.
_BARE_CHARS = re.compile(r"[A-Za-z0-9_.\-:/\[\]\x00]*")
_BARE_START = re.compile(r"[A-Za-z_]")
_BAD_START = re.compile(r"\x00(?![A-Za-z_])")      # a literal first: the engine scans for NULs
_QUOTED_WORDS = frozenset(("None", "True", "False"))
_TYPE, _NAME = attrgetter("type"), attrgetter("name")


def format_names(names: list) -> list:
    """``format_name`` of each name."""
    joined = "\x00".join(names)
    if names and joined.count("\x00") == len(names) - 1 and _BARE_CHARS.fullmatch(joined) \
            and _BARE_START.match(joined) and not _BAD_START.search(joined) and _QUOTED_WORDS.isdisjoint(names):
        return names
    return list(map(format_name, names))


def param_lines(params: dict):
    """``.param ID NAME`` for each parameter, in blocks."""
    ids = list(params)
    names = format_names(list(map(_NAME, params.values())))
    for b0 in range(0, len(ids), BLOCK):
        yield "\n".join([f".param {pid} {name}" for pid, name in zip(ids[b0:b0 + BLOCK], names[b0:b0 + BLOCK])])


def const_lines(constants: Iterable, literals: list, directive: Callable) -> Iterable[str]:
    """``.const`` lines in blocks; ``literals`` are Tables' texts of the constants, in order.
    A block of int/float/str/list constants (no ``len=`` to consider) is one comprehension of
    f-strings; in any other block, the null and bool ones go through ``directive(constant,
    literal)``."""
    consts = list(constants)
    names = L.CONST_TYPE_NAMES
    plain = {t: names[t] for t in set(names) - {L.CONST_NULL, L.CONST_BOOL}}
    for b0 in range(0, len(consts), BLOCK):
        block, lits = consts[b0:b0 + BLOCK], literals[b0:b0 + BLOCK]
        if plain.keys() >= set(map(_TYPE, block)) and None not in lits:
            yield "\n".join([f".const {c.id} {plain[c.type]} {lit}" for c, lit in zip(block, lits)])
        else:
            yield "\n".join([f".const {c.id} {plain[c.type]} {lit}" if c.type in plain and lit is not None
                             else ".const " + directive(c, lit) for c, lit in zip(block, lits)])


def tensor_lines(nac: NacFile, format_meta: Callable) -> Iterable[str]:
    """``.tensor ID META    ; N bytes`` in tensor order, in blocks; a plain tensor's text after
    its id is made once per dtype, shape and byte count (a file with 25k tensors repeats a few
    hundred)."""
    texts: dict = {}
    params = nac.params
    order = nac.tensor_order
    for b0 in range(0, len(order), BLOCK):
        out: list = []
        add = out.append
        for pid in order[b0:b0 + BLOCK]:
            p = params.get(pid)
            if p is None:
                continue
            m = p.meta
            if m is None:
                continue
            if m.quant or m.extra:
                add(f".tensor {pid} {format_meta(m)}    ; {p.data_length} bytes")
                continue
            key = (m.dtype, m.shape, p.data_length)
            tail = texts.get(key)
            if tail is None:
                if len(texts) > 65536:
                    texts.clear()
                tail = texts[key] = f" {format_meta(m)}    ; {p.data_length} bytes"
            add(f".tensor {pid}{tail}")
        if out:
            yield "\n".join(out)
