"""The source map: this project's RSRC extension from a tick back to the user's PyTorch code.

``nac compile`` (unless ``--no-debug-info``) stores, per instruction, the module path
(``encoder.layer.0.attention.self``), the exported graph node's name, and the user's
``file:line`` with that line's text, as the resource ``nac-studio/source-map`` (UTF-8 JSON):

    {"version": 2, "files": ["…/modeling_bert.py", …],
     "entries": [[tick, module_path, node_name, file_index|null, line|null, code|null], …],
     "frames": [[name, file_index, line, code], …],
     "stacks": [[frame_index, …] | null, …]}

Files and frames are tables so a path or a call site is stored once. ``stacks`` (version 2) runs
beside ``entries``: each instruction's whole call stack in the user's code, outermost first
(``BertModel.forward`` at the line calling the encoder, …, ``encoder.layer.0.attention.self
(BertSelfAttention.forward)`` at the line of the op), which debuggers show as stack frames. A
version-1 map has no stacks (its rows are the same, so a version-1 reader still reads rows). A reader that ignores the resource still runs the
file. Like every byte of a file the payload is untrusted: size, counts and string lengths are
bounded, and defects are ``NacFormatError("RSRC", offset, reason)``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from ..errors import NacFormatError
from .input_signature import resource_json

RESOURCE_NAME = "nac-studio/source-map"
VERSION = 2
MAX_PAYLOAD_BYTES = 64 << 20
MAX_ENTRIES = 1 << 20
MAX_FILES = 1 << 16
MAX_TEXT = 4096               # a module path, node name, file path or line of code


@dataclass(frozen=True)
class SourceEntry:
    """Where the instruction at ``tick`` came from."""
    tick: int
    module_path: str             # "" for the top-level module
    node_name: str
    file: Optional[str] = None
    line: Optional[int] = None
    code: Optional[str] = None   # the line's text as recorded at compile time
    stack: tuple = ()            # ((frame name, file, line, code), …) outermost first; () unknown

    @property
    def location(self) -> str:
        if self.file is None:
            return ""
        return f"{self.file}:{self.line}" if self.line is not None else self.file


class SourceMap:
    """The entries of a file's source map, by tick."""

    def __init__(self, entries: Iterable[SourceEntry]):
        self._by_tick = {e.tick: e for e in entries}
        self.entries: list[SourceEntry] = sorted(self._by_tick.values(), key=lambda e: e.tick)

    def entry(self, tick: int) -> Optional[SourceEntry]:
        return self._by_tick.get(tick)

    def __len__(self) -> int:
        return len(self.entries)

    def modules(self) -> dict[str, list[int]]:
        """Module path → the ticks recorded under it (in tick order; "" is the top-level module)."""
        out: dict[str, list[int]] = {}
        for e in self.entries:
            out.setdefault(e.module_path, []).append(e.tick)
        return out


def encode_source_map(entries: Iterable[SourceEntry]) -> bytes:
    """The resource payload (files in first-use order by tick; compact JSON: same entries, same bytes)."""
    files: dict[str, int] = {}
    frames: dict[tuple, int] = {}
    rows, stacks = [], []
    for e in sorted(entries, key=lambda e: e.tick):
        fi = None
        if e.file is not None:
            fi = files.setdefault(_clip(e.file), len(files))
        rows.append([int(e.tick), _clip(e.module_path), _clip(e.node_name), fi,
                     None if e.line is None else int(e.line), None if e.code is None else _clip(e.code)])
        stack = []
        for name, file, line, code in e.stack:
            frame = (_clip(name), files.setdefault(_clip(file), len(files)), int(line), _clip(code or ""))
            stack.append(frames.setdefault(frame, len(frames)))
        stacks.append(stack or None)
    return json.dumps({"version": VERSION, "files": list(files), "entries": rows,
                       "frames": [list(f) for f in frames], "stacks": stacks},
                      separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def set_source_map(nac, entries: Iterable[SourceEntry]) -> None:
    """Store ``entries`` in ``nac.rsrc`` (replacing an earlier map, keeping other resources)."""
    from .model import Resource
    payload = encode_source_map(entries)
    kept = [r for r in (nac.rsrc or []) if r.name != RESOURCE_NAME]
    nac.rsrc = kept + [Resource(RESOURCE_NAME, _payload=payload)]


def _clip(s: str) -> str:
    return s if len(s) <= MAX_TEXT else s[:MAX_TEXT - 1] + "…"


def line_ticks(smap: "SourceMap", recorded: str, line: int, line_now=None) -> list[int]:
    """The ticks source ``line`` of ``recorded`` (the map's name for a file) made: the ticks whose
    op is on it; else, for a line that calls a module or function, the first tick of each run of
    ticks inside that call (a line breakpoint's ticks, in ``nac dap`` and the Studio).
    ``line_now(recorded, line, code)`` says where a recorded line stands in the file now (the
    file may have changed since the compile); without it the recorded numbers are used."""
    now = line_now or (lambda _file, ln, _code: ln)
    direct = [e.tick for e in smap.entries if e.file == recorded and now(recorded, e.line, e.code) == line]
    if direct:
        return direct
    out, last = [], -2
    for e in smap.entries:
        if any(f[1] == recorded and now(recorded, f[2], f[3]) == line for f in e.stack):
            if e.tick != last + 1:
                out.append(e.tick)
            last = e.tick
    return out


def module_paths(nac) -> dict[int, str]:
    """Tick -> the module that ran it (``h.24.mlp.c_fc``; whitespace folded, so it prints on one
    line), for listings and tables that must never fail over a comment: {} when the file has no
    source map or one that does not decode."""
    try:
        smap = read_source_map(nac)
    except NacFormatError:
        return {}
    return {e.tick: " ".join(e.module_path.split()) for e in smap.entries if e.module_path} \
        if smap is not None else {}


def read_source_map(nac) -> Optional[SourceMap]:
    """The file's source map, ``None`` when it has none. Decoded once per resource entry and
    shared (the Studio's Source, IR Text and graph grouping all ask for it as a file opens, and
    decoding GPT-2's took ~45 ms): treat the result as read-only. A replaced entry
    (:func:`set_source_map`) is decoded again."""
    from .input_signature import find_resource
    resource = find_resource(nac, RESOURCE_NAME)
    cached = getattr(nac, "_source_map_cache", None)
    if cached is not None and resource is not None and cached[0] is resource:
        return cached[1]
    smap = _decode_source_map(nac)
    if resource is not None:
        try:
            nac._source_map_cache = (resource, smap)
        except AttributeError:      # an object without a __dict__ (a test double): no cache
            pass
    return smap


def _decode_source_map(nac) -> Optional[SourceMap]:
    value, off = resource_json(nac, RESOURCE_NAME, MAX_PAYLOAD_BYTES, (1, VERSION))
    if value is None:
        return None

    def fail(reason: str) -> NacFormatError:
        return NacFormatError("RSRC", off, f"{RESOURCE_NAME}: {reason}")

    files, rows = value.get("files"), value.get("entries")
    if not isinstance(files, list) or len(files) > MAX_FILES:
        raise fail(f"'files' must be a list of at most {MAX_FILES} paths")
    if not all(isinstance(f, str) and len(f) <= MAX_TEXT for f in files):
        raise fail(f"'files' must hold strings of at most {MAX_TEXT} characters")
    if not isinstance(rows, list) or len(rows) > MAX_ENTRIES:
        raise fail(f"'entries' must be a list of at most {MAX_ENTRIES} rows")
    n_ins = len(getattr(nac, "instructions", None) or ()) or None
    stacks = _decode_stacks(value, files, len(rows), fail)
    entries = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != 6:
            raise fail(f"entries[{i}] must be [tick, module, node, file, line, code]")
        tick, module, node, fi, line, code = row
        if type(tick) is not int or tick < 0 or (n_ins is not None and tick >= n_ins):
            raise fail(f"entries[{i}]: tick {tick!r} is not an instruction index")
        for what, s, nullable in (("module", module, False), ("node", node, False), ("code", code, True)):
            if not (isinstance(s, str) and len(s) <= MAX_TEXT or nullable and s is None):
                raise fail(f"entries[{i}]: {what} must be a string of at most {MAX_TEXT} characters")
        if fi is not None and (type(fi) is not int or not 0 <= fi < len(files)):
            raise fail(f"entries[{i}]: file index {fi!r} is not in the files table")
        if line is not None and (type(line) is not int or not 0 < line < 1 << 31):
            raise fail(f"entries[{i}]: line {line!r} is not a positive integer")
        entries.append(SourceEntry(tick, module, node, None if fi is None else files[fi], line, code,
                                   stacks[i] if stacks is not None else ()))
    return SourceMap(entries)


def _decode_stacks(value: dict, files: list, n_rows: int, fail) -> Optional[list]:
    """Version 2's call stacks, one per entry row (None in a version-1 map)."""
    table, stacks = value.get("frames"), value.get("stacks")
    if table is None and stacks is None:
        return None
    if not isinstance(table, list) or len(table) > MAX_ENTRIES:
        raise fail(f"'frames' must be a list of at most {MAX_ENTRIES} frames")
    frames = []
    for i, f in enumerate(table):
        if not (isinstance(f, list) and len(f) == 4 and isinstance(f[0], str) and len(f[0]) <= MAX_TEXT
                and type(f[1]) is int and 0 <= f[1] < len(files) and type(f[2]) is int and 0 < f[2] < 1 << 31
                and isinstance(f[3], str) and len(f[3]) <= MAX_TEXT):
            raise fail(f"frames[{i}] must be [name, file index, line, code]")
        frames.append((f[0], files[f[1]], f[2], f[3]))
    if not isinstance(stacks, list) or len(stacks) != n_rows:
        raise fail("'stacks' must be a list with one entry per row of 'entries'")
    out = []
    budget = 16 * MAX_ENTRIES          # frames over all stacks: bounded like every other count
    for i, s in enumerate(stacks):
        if s is None:
            out.append(())
            continue
        if not isinstance(s, list) or len(s) > 256 or not all(type(k) is int and 0 <= k < len(frames) for k in s):
            raise fail(f"stacks[{i}] must be a list of at most 256 frame indices")
        budget -= len(s)
        if budget < 0:
            raise fail("the stacks hold too many frames")
        out.append(tuple(frames[k] for k in s))
    return out


#: a source file larger than this is not read for its lines (a viewer shows the recorded line only)
MAX_SOURCE_BYTES = 4 << 20
#: how far from its recorded number a recorded line is looked for in a file that changed
RELOCATE_WINDOW = 400


def find_recorded_line(lines: Sequence[str], line: int, code: Optional[str]) -> Optional[int]:
    """Where the line recorded at compile time stands in ``lines`` (a source file as it is now,
    1-based ``line``): ``line`` itself when it still reads ``code`` (or nothing was recorded to
    compare), else the nearest line within :data:`RELOCATE_WINDOW` that reads it (the file changed
    since the compile: another release of a library, or the user's own edits), else ``None``.
    Lines compare without their indentation and trailing blanks."""
    want = (code or "").strip()
    if not want:
        return line
    n = len(lines)
    if 1 <= line <= n and lines[line - 1].strip() == want:
        return line
    for d in range(1, RELOCATE_WINDOW + 1):
        for k in (line - d, line + d):
            if 1 <= k <= n and lines[k - 1].strip() == want:
                return k
    return None


class SourceFiles:
    """The recorded source files as this machine has them now, for a viewer of recorded lines (the
    Studio's Source pane, ``nac dap``): each recorded path located once (:func:`locate_source`); a
    file read when first asked for and again when its size or mtime changes (the user edits their
    model while it is open), one stat per ask; a recorded line found by its text
    (:func:`find_recorded_line`), once per line and version of the file."""

    def __init__(self):
        self._located: dict[tuple, Optional[str]] = {}     # (recorded file, near) -> local path
        self._read: dict[str, tuple] = {}                  # path -> (stamp, text, lines) as last read
        self._found: dict[tuple, Optional[int]] = {}       # (path, stamp, line, code) -> line now

    def locate(self, recorded: Optional[str], near: Optional[str] = None) -> Optional[str]:
        key = (recorded, near)
        if key not in self._located:
            self._located[key] = locate_source(recorded, near)
        return self._located[key]

    def _entry(self, path: str) -> tuple:
        import os
        from ..files import open_regular
        try:
            st = os.stat(path)
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        cached = self._read.get(path)
        if cached is None or cached[0] != stamp:
            text = None          # gone, unreadable, or too big: shown as recorded
            if stamp is not None and stamp[1] <= MAX_SOURCE_BYTES:
                try:
                    with open_regular(path) as fh:
                        text = fh.read(MAX_SOURCE_BYTES).decode("utf-8", "replace")
                except (OSError, ValueError):
                    text = None
            cached = self._read[path] = (stamp, text, None if text is None else text.splitlines())
        return cached

    def text(self, path: str) -> Optional[str]:
        """The file's text as it is now (a new object when it changed since the last ask)."""
        return self._entry(path)[1]

    def readable(self, path: str) -> bool:
        return self._entry(path)[2] is not None

    def line_now(self, path: str, line: int, code: Optional[str]) -> Optional[int]:
        """Where recorded ``line`` (reading ``code``) stands in the file now; None where the file
        cannot be read or no line near it reads so."""
        stamp, _, lines = self._entry(path)
        if lines is None:
            return None
        key = (path, stamp, line, code)
        if key not in self._found:
            self._found[key] = find_recorded_line(lines, line, code)
        return self._found[key]

    def current_line(self, recorded: str, line: Optional[int], code: Optional[str],
                     near: Optional[str] = None) -> Optional[int]:
        """Recorded ``line`` of ``recorded`` as its local copy reads now; the recorded number
        where there is no readable copy or no line near it reads ``code``."""
        local = self.locate(recorded, near) if line else None
        if local is None or not self.readable(local):
            return line
        return self.line_now(local, line, code) or line


#: What a source map may name as its source: PyTorch code, and a MIND program converted to NAC.
SOURCE_SUFFIXES = (".py", ".ir")


def locate_source(file: Optional[str], near: Optional[str] = None) -> Optional[str]:
    """A readable local copy of a recorded source ``file``, or ``None``.

    Recorded paths are relative to a library directory, a project root or the working directory
    (see :mod:`nac_engine.compiler.debug_info`), so they are looked for under the directory of
    ``near`` (the .nac file) and its ancestors, the working directory, and the interpreter's
    library paths. The path comes from the file being opened, so only source files
    (:data:`SOURCE_SUFFIXES`) and no ``..`` components are accepted: a crafted map cannot make a
    viewer show an arbitrary file."""
    import os
    import sys
    import sysconfig
    if not file or not file.endswith(SOURCE_SUFFIXES) or ".." in file.replace("\\", "/").split("/"):
        return None
    if os.path.isabs(file):
        return file if os.path.isfile(file) else None
    roots = []
    if near:
        d = os.path.dirname(os.path.abspath(near))
        for _ in range(16):
            roots.append(d)
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    roots.append(os.getcwd())
    roots += [p for p in sysconfig.get_paths().values() if p] + [p for p in sys.path if p]
    for root in roots:
        candidate = os.path.join(root, file)
        if os.path.isfile(candidate):
            return candidate
    return None
