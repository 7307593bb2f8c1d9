"""MMAP schedule findings in the Problems view: checked in the background after a file
opens, violations as errors and hazards as warnings, each placed at its tick's MMAP record
(or instruction), and the problem list, dock title, tab and structure marks refreshed when
they arrive."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

import nac_engine
from nac_engine.format.model import MmapCommand
from nac_engine.format.reader import read
from nac_engine.format import layout as L
from nac_studio.model import schedule_problems
from nac_studio.model.document import Document, Problem, Selection, severity_of
from nac_studio.views.problems import ROLE_SEVERITY

from .conftest import wait_idle

FREE = L.MMAP_FREE


def _record(nac, tick):
    return next(r for r in nac.mmap if r.tick == tick)


@pytest.fixture
def bad_schedule(demo_path, tmp_path):
    """The demo model with three schedule faults put in by hand.

    Demo MMAP (tick: commands): FREE v0/v1/v2 on tick 4, FREE v8/v9/v10 on tick 12; v0 and v1
    are read only by instruction 3, v8 only by instruction 11. Ticks 2, 6, 10 and 11 have no
    MMAP record. Edits:
      * drop FREE v0 (tick 4)   -> violation never_freed, reported at v0's last use, tick 3 (has a record)
      * drop FREE v8 (tick 12)  -> violation never_freed at tick 11 (no record: placed at instruction 11)
      * FREE v1 moves to tick 3 -> hazard same_tick_free at tick 3 (instruction 3 reads v1)
    """
    nac = read(str(demo_path))
    assert [i.index for i in nac.instructions if 0 in i.producers()] == [3]
    assert [i.index for i in nac.instructions if 1 in i.producers()] == [3]
    assert [i.index for i in nac.instructions if 8 in i.producers()] == [11]
    assert {r.tick for r in nac.mmap}.isdisjoint({11})
    tick4, tick12, tick3 = _record(nac, 4), _record(nac, 12), _record(nac, 3)
    tick4.commands = [c for c in tick4.commands if not (c.action == FREE and c.target in (0, 1))]
    tick12.commands = [c for c in tick12.commands if not (c.action == FREE and c.target == 8)]
    tick3.commands.append(MmapCommand(FREE, 1))
    path = tmp_path / "bad_schedule.nac"
    nac_engine.write(nac, str(path))
    nac.close()
    return path


def _expected(path):
    """(severity, kind, tick, offset, selection) per finding, from the file's own record
    and instruction offsets (what the reader recorded, not the Studio's span index)."""
    nac = read(str(path))
    rec3 = _record(nac, 3).offset
    ins11 = nac.instructions[11].offset
    nac.close()
    return sorted([("error", "never_freed", 3, rec3, Selection("mmap", 3)),
                   ("error", "never_freed", 11, ins11, Selection("instruction", 11)),
                   ("warning", "same_tick_free", 3, rec3, Selection("mmap", 3))], key=str)


def _mmap_rows(view):
    rows = [view.model.problem(r) for r in range(view.model.rowCount())]
    return [p for p in rows if getattr(p, "section", None) == "MMAP"]


def test_findings_become_placed_problems(bad_schedule):
    doc = Document.open(str(bad_schedule))
    try:
        assert doc.problems == []                 # the file decodes cleanly
        report = schedule_problems.check(None, doc.nac)
        found = schedule_problems.to_problems(doc, report)
        got = sorted([(p.severity, p.kind, (p.selection.key if p.selection else None), p.offset, p.selection)
                      for p in found], key=str)
        assert got == _expected(bad_schedule)
        assert all(p.section == "MMAP" and p.kind in p.reason for p in found)
    finally:
        doc.nac.close()


def test_set_problems_tells_observers_and_joins_the_list(demo_path):
    doc = Document.open(str(demo_path))
    events = []
    doc.observe(lambda ev, _d, src: events.append((ev, src)))
    base = list(doc.problems)
    extra = [Problem("MMAP", 100, "a", "error"), Problem("MMAP", None, "b", "warning")]
    doc.set_problems("mmap", extra, source="me")
    assert events == [("problems", "me")]
    assert doc.problems == base + extra and doc.problems_from("mmap") == extra
    assert [severity_of(p) for p in doc.problems[len(base):]] == ["error", "warning"]
    doc.set_problems("mmap", [])                 # a re-run replaces, never appends
    assert doc.problems == base and doc.problems is doc.nac.problems
    with pytest.raises(ValueError):
        Problem("MMAP", 0, "x", "fatal")
    doc.nac.close()


def test_problems_view_shows_violations_and_hazards_and_clicking_goes_there(window, bad_schedule, qtbot):
    qdoc = window.open_and_wait(bad_schedule)
    view = window.problems_view
    rows = _mmap_rows(view)
    got = sorted([(p.severity, p.kind, p.selection.key, p.offset, p.selection) for p in rows], key=str)
    assert got == _expected(bad_schedule)
    assert view.count() == len(qdoc.doc.problems) == 3
    assert view.summary.text() == "2 errors · 1 warning"
    assert window.docks["problems"].windowTitle() == "Problems (3)"
    assert window.tabs.tabToolTip(window.tabs.currentIndex()).endswith("2 errors, 1 warning")
    assert qdoc.selection is None and window.properties_view.model.value("File", "Problems") == "3"
    # warnings look different: their own icon and text colour
    by_sev = {}
    for r in range(view.model.rowCount()):
        idx = view.model.index(r, 0)
        by_sev[view.model.data(idx, ROLE_SEVERITY)] = r
    err, warn = (view.model.index(by_sev[s], 0) for s in ("error", "warning"))
    icon_img = lambda i: view.model.data(i, Qt.ItemDataRole.DecorationRole).pixmap(16, 16).toImage()  # noqa: E731
    assert icon_img(err) != icon_img(warn)
    fg = lambda i: view.model.data(i.siblingAtColumn(2), Qt.ItemDataRole.ForegroundRole)  # noqa: E731
    assert fg(err) is None and fg(warn) is not None
    # clicking a row selects the MMAP record (or instruction) and moves the tick there
    for target in (Selection("instruction", 11), Selection("mmap", 3)):
        row = next(r for r in range(view.proxy.rowCount())
                   if view.model.problem(view.proxy.mapToSource(view.proxy.index(r, 0)).row()).selection == target)
        rect = view.table.visualRect(view.proxy.index(row, 2))
        qtbot.mouseClick(view.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        assert qdoc.selection == target and qdoc.tick == target.key
        span = qdoc.doc.span_of(target)
        assert window.hex_view.area.cursor_offset == span.offset
        dis = window.disassembly_view
        assert dis.model.tick_at(dis.table.currentIndex().row()) == target.key
    # the structure tree marks the records: errors win over warnings on the way up
    model = window.structure_view.model
    mmap = qdoc.nac.spans.find("MMAP")
    assert model.severity_at(mmap) == "error"
    assert model.severity_at(qdoc.doc.span_of(Selection("mmap", 3))) == "error"
    assert model.severity_at(qdoc.doc.span_of(Selection("instruction", 11))) == "error"
    assert model.severity_at(qdoc.doc.span_of(Selection("mmap", 0))) is None
    # warnings can be hidden
    view.warnings_button.setChecked(False)
    assert view.proxy.rowCount() == 2
    view.warnings_button.setChecked(True)
    assert view.proxy.rowCount() == 3


def test_the_check_runs_off_the_ui_thread_after_the_file_is_interactive(window, bad_schedule, qtbot,
                                                                        monkeypatch):
    import nac_engine.format.mmap_lint as mc
    real = mc.check_schedule
    release = threading.Event()
    ran_on = []

    def slow_check(nac):
        ran_on.append(threading.current_thread())
        release.wait(10)
        return real(nac)

    monkeypatch.setattr(mc, "check_schedule", slow_check)
    with qtbot.waitSignal(window.documentOpened, timeout=10000) as blocker:
        window.open_path(str(bad_schedule))
    qdoc = blocker.args[0]
    qtbot.waitUntil(lambda: bool(ran_on), timeout=10000)
    # open and interactive while the check still runs: views populated, no MMAP rows yet
    assert ran_on[0] is not threading.main_thread()
    assert window.active is qdoc and window.hex_view.area.size_bytes == qdoc.nac.size
    assert window.problems_view.count() == 0 and not _mmap_rows(window.problems_view)
    assert any(t.title.startswith("Checking the MMAP schedule") for t in window.tasks.active)
    with qtbot.waitSignal(qdoc.problemsChanged, timeout=10000):
        release.set()
    assert len(_mmap_rows(window.problems_view)) == 3
    assert window.docks["problems"].windowTitle() == "Problems (3)"
    wait_idle(qtbot, window)


def test_a_failing_check_is_a_warning_row_not_a_crash(window, bad_schedule, qtbot, monkeypatch):
    import nac_engine.format.mmap_lint as mc

    def broken(_nac):
        raise IndexError("list index out of range")
    monkeypatch.setattr(mc, "check_schedule", broken)
    qdoc = window.open_and_wait(bad_schedule)
    rows = _mmap_rows(window.problems_view)
    assert len(rows) == 1 and rows[0].severity == "warning" and "IndexError" in rows[0].reason
    assert qdoc.doc.problems == rows
    # a problem with no place in the file does not upset the panels that list problems by bytes
    qdoc.select(Selection("section", "MMAP"))
    assert window.properties_view.heading.text() == "Section MMAP"
    window.problems_view.go_to_row(0)
    assert qdoc.selection == Selection("section", "MMAP")   # nowhere to go: the selection stays


def test_no_check_without_a_decoded_header(window, tmp_path, qtbot):
    titles = []
    window.tasks.started.connect(lambda t: titles.append(t.title))
    path = tmp_path / "junk.nac"
    path.write_bytes(b"NAC" + bytes(10))
    qdoc = window.open_and_wait(path)
    assert not qdoc.nac.header_decoded
    assert not any(t.startswith("Checking the MMAP schedule") for t in titles)
    assert not qdoc.doc.problems_from(schedule_problems.CHECK)


def test_reference_v16_planner_never_freed_in_the_corpus(window, qtbot):
    from tests.corpus_paths import CORPUS
    found = sorted((CORPUS / "nac" / "bert_tiny__v1.6").glob("*.nac"))
    if not found:
        pytest.skip("corpus case bert_tiny__v1.6 not present")
    qdoc = window.open_and_wait(found[0])
    nac = read(str(found[0]))
    from nac_engine.format.mmap_lint import check_schedule
    report = check_schedule(nac)
    nac.close()
    rows = _mmap_rows(window.problems_view)
    assert sorted((p.kind, p.severity) for p in rows) == sorted(
        [(f.kind, "error") for f in report.violations] + [(f.kind, "warning") for f in report.hazards])
    assert any(p.kind == "never_freed" and p.severity == "error" for p in rows)
    assert window.problems_view.count() == len(qdoc.doc.problems)


ROOT = Path(__file__).resolve().parents[2]


def _fresh_python(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_studio_problem_check_does_not_import_torch(bad_schedule):
    """The Studio's problem check (what its worker runs) in a fresh process: the findings
    come back and torch was never imported, so the check can run in a thread of the UI's
    process without the long GIL holds of a torch import."""
    code = f"""if True:
        import sys
        from nac_studio.model.document import Document
        from nac_studio.model import schedule_problems
        doc = Document.open({str(bad_schedule)!r})
        found = schedule_problems.to_problems(doc, schedule_problems.check(None, doc.nac))
        print(sorted(p.kind for p in found))
        print("torch" in sys.modules)
        """
    lines = _fresh_python(code).split()
    assert lines[-1] == "False"
    assert "never_freed" in " ".join(lines[:-1]) and "same_tick_free" in " ".join(lines[:-1])


def test_no_child_process_path_left():
    """The child-process check (its duplicate Finding/Report and JSON protocol) is gone."""
    import importlib.util
    assert importlib.util.find_spec("nac_studio.schedule_lint") is None
    src = (ROOT / "nac_studio" / "main_window.py").read_text()
    assert "subprocess" not in (ROOT / "nac_studio" / "model" / "schedule_problems.py").read_text()
    assert "schedule_lint" not in src


@pytest.mark.timing
def test_problems_appear_soon_after_opening_a_corpus_file(window, qtbot):
    """Soon: without waiting for anything else (the latency figure is bench_studio's; the bound
    here holds on a loaded 2-core machine)."""
    from tests.corpus_paths import CORPUS
    found = sorted((CORPUS / "nac" / "bert_tiny__v1.6").glob("*.nac"))
    if not found:
        pytest.skip("corpus case bert_tiny__v1.6 not present")
    started = time.perf_counter()
    with qtbot.waitSignal(window.documentOpened, timeout=10000) as blocker:
        window.open_path(str(found[0]))
    qdoc = blocker.args[0]
    qtbot.waitUntil(lambda: bool(qdoc.doc.problems_from(schedule_problems.CHECK)), timeout=10000)
    elapsed = time.perf_counter() - started
    assert elapsed < 5.0, f"schedule problems took {elapsed:.2f} s after opening"
    wait_idle(qtbot, window)
