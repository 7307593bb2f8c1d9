"""The MMAP schedule check as Studio problems (no Qt here).

:func:`check` runs :func:`nac_engine.format.mmap_lint.check_schedule` — torch-free, so it
neither loads torch nor holds the GIL for long — in a background task;
:func:`to_problems` turns its report into :class:`~nac_studio.model.document.Problem` rows back
on the UI thread. The split is deliberate: the check reads only decoded instructions and
MMAP records (and the file's def-use index), while finding each row's byte offset walks
the lazily built span tree, which only the UI thread may build.
"""
from __future__ import annotations

from typing import Optional

from nac_engine.format import mmap_lint
from nac_engine.format.mmap_lint import ScheduleReport
from nac_engine.format.model import NacFile

from .document import Document, Problem, Selection

#: The name the findings are stored under (:meth:`Document.set_problems`).
CHECK = "mmap"
SECTION = "MMAP"


def wanted(nac: NacFile) -> bool:
    """Worth running: the header decoded and there is a schedule to check (an empty MMAP
    means "no schedule", which the checker accepts without looking)."""
    return bool(nac.header_decoded) and bool(nac.mmap)


def check(ctx, nac: NacFile) -> Optional[ScheduleReport]:
    """Background part: the schedule report, or ``None`` when not :func:`wanted`. Raises
    what the checker raises; the caller reports it (a damaged file may hold any value in
    any field)."""
    if not wanted(nac):
        return None
    if ctx is not None:
        ctx.check()
    return mmap_lint.check_schedule(nac)


def to_problems(doc: Document, report: Optional[ScheduleReport]) -> list[Problem]:
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


def _place(doc: Document, tick) -> tuple[Optional[Selection], Optional[int]]:
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
    return Problem(SECTION, None, f"schedule check failed: {type(exc).__name__}: {exc}", "warning", None,
                   "check_failed")
