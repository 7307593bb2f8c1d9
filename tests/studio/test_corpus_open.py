"""Every shared corpus file opens in the Studio, and every view shows it."""
from __future__ import annotations

from nac_studio.model.document import Selection


def test_corpus_file_opens_in_every_view(window, corpus_file):
    qdoc = window.open_and_wait(corpus_file)
    nac = qdoc.nac
    assert window.tabs.count() == 1 and window.tabs.tabText(0) == corpus_file.name
    assert window.hex_view.area.size_bytes == corpus_file.stat().st_size
    assert window.structure_view.model.rowCount() == len(nac.spans.children)
    assert window.problems_view.count() == len(qdoc.doc.problems)
    assert window.graph_view.shown is not None, "the graph was laid out"
    # walk a few instructions and every parameter: each view answers without raising
    n = len(nac.instructions)
    for tick in sorted({0, n // 2, n - 1}):
        qdoc.select(Selection("instruction", tick))
        span = qdoc.doc.span_of(Selection("instruction", tick))
        assert window.hex_view.area.highlights() == [(span.offset, span.end)]
        assert window.structure_view.current_span() is span
        assert window.properties_view.heading.text().startswith(f"t{tick} ")
    for pid in list(nac.params)[:8]:
        qdoc.select(Selection("param", pid))
        assert window.properties_view.heading.text() == nac.params[pid].name
    for tag in nac.layout:
        qdoc.select(Selection("section", tag))
        assert window.properties_view.heading.text() == f"Section {tag}"
