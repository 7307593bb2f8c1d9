"""The MMAP schedule check as Studio problems (no Qt here).

:func:`nac_engine.runtime.mmap_check.check_schedule` imports torch (about two seconds
cold), so the Studio runs :func:`check` in a background task after a file opens and turns
its report into :class:`~nac_studio.document.Problem` rows with :func:`to_problems` back
on the UI thread. The split is deliberate: the check reads only decoded instructions and
MMAP records, while finding each row's byte offset walks the lazily built span tree,
which only the UI thread may build.
"""
from __future__ import annotations

from typing import Any, Optional

from nac_engine.format.model import NacFile

from .document import Document, Problem, Selection

#: The name the findings are stored under (:meth:`Document.set_problems`).
CHECK = "mmap"
SECTION = "MMAP"


def wanted(nac: NacFile) -> bool:
    """Worth running: the header decoded and there is a schedule to check (an empty MMAP
    means "no schedule", which the checker accepts without looking, so torch need not load)."""
    return bool(nac.header_decoded) and bool(nac.mmap)


def check(ctx, nac: NacFile) -> Optional[Any]:
    """Background part: the :class:`ScheduleReport`, or ``None`` when not :func:`wanted`.

    Raises whatever the checker raises; the caller reports it (a damaged file may hold
    any value in any field, and the check is a nicety, never a reason to fail the open).
    """
    if not wanted(nac):
        return None
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
    return Problem(SECTION, None, f"schedule check failed: {type(exc).__name__}: {exc}", "warning",
                   None, "check_failed")
