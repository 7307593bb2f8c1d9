"""Opening (or reloading) a file hands each view the document once, not once per signal path."""
from __future__ import annotations


def _count_set_document(window, monkeypatch) -> list:
    calls = []
    view = window.views["disassembly"]
    real = view.set_document

    def counting(qdoc):
        calls.append(qdoc)
        return real(qdoc)
    monkeypatch.setattr(view, "set_document", counting)
    return calls


def test_open_hands_each_view_the_document_once(window, demo_path, monkeypatch):
    calls = _count_set_document(window, monkeypatch)
    first = window.open_and_wait(demo_path)
    second = window.open_and_wait(demo_path.with_name("demo_cnn.nac"))   # a second tab: the bar's signal fires
    assert [c for c in calls if c is not None] == [first, second]


def test_reload_hands_each_view_the_new_document_once(window, qtbot, demo_path, monkeypatch):
    old = window.open_and_wait(demo_path)
    calls = _count_set_document(window, monkeypatch)
    with qtbot.waitSignal(window.documentOpened, timeout=20000):
        window.reload_active()
    qtbot.waitUntil(lambda: old not in window.docs, timeout=5000)
    assert len(calls) == 1 and calls[0] is window.active and window.active is not old
