"""The MMAP schedule check as Studio problems (no Qt here).

:func:`nac_engine.runtime.mmap_check.check_schedule` takes milliseconds, but its module
imports torch, and importing torch holds the GIL in long stretches: done in a background
thread it froze the UI for up to ~230 ms while a file opened (the heartbeat of
``benchmarks/bench_studio.py`` on GPT-2 small: 46 ms without the check). So while torch
is not loaded in this process, :func:`check` runs the check in a child process
(``python -m nac_studio.schedule_lint FILE``, JSON on stdout) and only waits for it; once
something else has loaded torch, or when the child cannot be used (no file on disk, the
file changed since it was opened, the child failed), it runs in-process.

:func:`check` runs in a background task; :func:`to_problems` turns its report into
:class:`~nac_studio.document.Problem` rows back on the UI thread. The split is
deliberate: the check reads only decoded instructions and MMAP records, while finding
each row's byte offset walks the lazily built span tree, which only the UI thread may build.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from nac_engine.format.model import NacFile

from .document import Document, Problem, Selection

#: The name the findings are stored under (:meth:`Document.set_problems`).
CHECK = "mmap"
SECTION = "MMAP"
#: Where the check runs: ``None`` in a child process while torch is not loaded here,
#: ``True`` always in a child, ``False`` never (the Studio's tests share one torch import).
CHILD_PROCESS: Optional[bool] = None
CHILD_TIMEOUT = 120.0     # seconds; a child that takes longer is killed and the check runs here


@dataclass(frozen=True)
class Finding:
    """One finding as the child process reports it (the fields of mmap_check.Finding)."""
    kind: str
    tick: int
    target: int
    message: str


@dataclass
class Report:
    violations: list = field(default_factory=list)
    hazards: list = field(default_factory=list)
    has_schedule: bool = True


class CheckFailed(Exception):
    """The checker raised (in the child process); the message says what."""


def wanted(nac: NacFile) -> bool:
    """Worth running: the header decoded and there is a schedule to check (an empty MMAP
    means "no schedule", which the checker accepts without looking, so torch need not load)."""
    return bool(nac.header_decoded) and bool(nac.mmap)


def check(ctx, nac: NacFile, path: Optional[str] = None, identity: Optional[tuple] = None) -> Optional[Any]:
    """Background part: the schedule report, or ``None`` when not :func:`wanted`.

    ``path``/``identity`` (the file and its ``(size, mtime_ns)`` when ``nac`` was read)
    let the check run in a child process on the same bytes. Raises what the checker
    raises; the caller reports it (a damaged file may hold any value in any field).
    """
    if not wanted(nac):
        return None
    use_child = CHILD_PROCESS if CHILD_PROCESS is not None else "torch" not in sys.modules
    if use_child and path and identity is not None and _identity(path) == tuple(identity):
        report = _check_in_child(ctx, path, tuple(identity))
        if report is not None:
            return report
    from nac_engine.runtime.mmap_check import check_schedule   # imports torch
    if ctx is not None:
        ctx.check()
    return check_schedule(nac)


def to_problems(doc: Document, report: Optional[Any]) -> list[Problem]:
    """Violations as errors and hazards as warnings, each placed at its tick's MMAP record
    (or at the instruction when that tick has no record, or nowhere when neither exists)."""
    if report is None or not getattr(report, "has_schedule", False):
        return []
    out: list[Problem] = []
    for severity, findings in (("error", report.violations), ("warning", report.hazards)):
        for f in findings:
            sel, offset = _place(doc, f.tick)
            # the message first: the panel is narrow and it already says what is wrong
            out.append(Problem(SECTION, offset, f"{f.message} [{f.kind}]", severity, sel, f.kind))
    return out


def _place(doc: Document, tick: Any) -> tuple[Optional[Selection], Optional[int]]:
    if not isinstance(tick, int):
        return None, None
    for kind in ("mmap", "instruction"):
        sel = Selection(kind, tick)
        span = doc.span_of(sel)
        if span is not None:
            return sel, span.offset
    return None, None


def failure_problem(exc: BaseException) -> Problem:
    """One row saying the check itself could not run (a damaged schedule, usually)."""
    text = str(exc) if isinstance(exc, CheckFailed) else f"{type(exc).__name__}: {exc}"
    return Problem(SECTION, None, f"schedule check failed: {text}", "warning", None, "check_failed")


# ----------------------------------------------------------------------- child process
def _identity(path: str) -> Optional[tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def _check_in_child(ctx, path: str, identity: tuple) -> Optional[Report]:
    """Run :func:`main` in a child and parse what it prints; ``None`` when the child
    could not give an answer about these very bytes (the caller then checks in-process)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])   # so the child imports this same package
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "nac_studio.schedule_lint", path], env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))
    except OSError:
        return None
    deadline = time.monotonic() + CHILD_TIMEOUT
    try:
        while True:
            try:
                out, _ = proc.communicate(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                if ctx is not None:
                    ctx.check()   # Cancelled: the finally clause ends the child
                if time.monotonic() > deadline:
                    return None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return _parse(out, identity)


def _parse(out: bytes, identity: tuple) -> Optional[Report]:
    try:
        data = json.loads(out)
    except ValueError:
        return None
    if not isinstance(data, dict) or tuple(data.get("identity") or ()) != identity:
        return None   # not our file's bytes (it changed on disk meanwhile)
    if "error" in data:
        raise CheckFailed(str(data["error"]))
    lists = []
    for name in ("violations", "hazards"):
        items = data.get(name)
        if not isinstance(items, list):
            return None
        found = []
        for f in items:
            try:
                found.append(Finding(str(f["kind"]), int(f["tick"]), int(f["target"]), str(f["message"])))
            except (KeyError, TypeError, ValueError):
                return None
        lists.append(found)
    return Report(lists[0], lists[1], bool(data.get("has_schedule")))


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m nac_studio.schedule_lint FILE``: the check's report as JSON, with the
    ``identity`` of the bytes read; a checker error is reported as ``{"error": ...}``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m nac_studio.schedule_lint FILE", file=sys.stderr)
        return 2
    from nac_engine.format.reader import read
    path = args[0]
    identity = _identity(path)
    try:
        nac = read(path, strict=False)
    except OSError as exc:
        print(f"{path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        out: dict = {"identity": list(identity) if identity else None}
        try:
            if wanted(nac):
                from nac_engine.runtime.mmap_check import check_schedule
                report = check_schedule(nac)
            else:
                report = Report(has_schedule=False)
            out.update(has_schedule=report.has_schedule,
                       violations=[_as_dict(f) for f in report.violations],
                       hazards=[_as_dict(f) for f in report.hazards])
        except Exception as exc:   # reported to the Studio as one row, as in-process
            out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        nac.close()
    print(json.dumps(out))
    return 0


def _as_dict(f) -> dict:
    return {"kind": f.kind, "tick": f.tick, "target": f.target, "message": f.message}


if __name__ == "__main__":
    sys.exit(main())
