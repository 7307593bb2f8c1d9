"""Structure, Properties and Problems panels: their item models and their sync with the document."""
from __future__ import annotations

import numpy as np
import pytest

from nac_studio.model.document import Selection
from nac_studio.views.problems import ProblemsModel, ProblemsView
from nac_studio.views.properties import PropertiesView, PropertyModel, inspect_bytes, tensor_stats
from nac_studio.views.structure import SpanTreeModel, StructureView


def test_span_tree_model_passes_qmodeltester(qtmodeltester, qdoc_for, demo_path):
    qdoc = qdoc_for(demo_path)
    model = SpanTreeModel(qdoc.nac.spans, qdoc.doc.problems)
    qtmodeltester.check(model)
    # the lazily built levels too: an instruction's fields, an MMAP record's commands
    ops = model.index_of(qdoc.nac.spans.find("OPS/instr[3]"))
    assert model.rowCount(ops) == len(qdoc.nac.spans.find("OPS/instr[3]").children) > 0
    qtmodeltester.check(model)


def test_span_tree_model_on_a_corpus_file(qtmodeltester, qdoc_for, corpus_case):
    qdoc = qdoc_for(corpus_case("bert_tiny"))
    model = SpanTreeModel(qdoc.nac.spans, qdoc.doc.problems)
    qtmodeltester.check(model)
    root = qdoc.nac.spans
    assert model.rowCount() == len(root.children)
    deep = root.find("OPS/instr[40]/A")
    idx = model.index_of(deep)
    assert idx.isValid() and model.span_for(idx) is deep
    assert model.parent(idx).internalPointer() is deep.parent


def test_structure_lazy_levels_are_not_built_until_shown(qdoc_for, demo_path, qtbot):
    qdoc = qdoc_for(demo_path)
    ops = qdoc.nac.spans.find("OPS")
    view = StructureView(qdoc)
    qtbot.addWidget(view)
    view.show()
    first = ops.children[2]   # instr[0]: building the section list is fine ...
    assert first._builder is not None   # ... its fields are still unbuilt
    assert view.model.hasChildren(view.model.index_of(first))
    assert first._builder is not None   # asking "has children?" did not build them


def test_structure_follows_and_sets_the_selection(qdoc_for, demo_path, qtbot):
    qdoc = qdoc_for(demo_path)
    view = StructureView(qdoc)
    qtbot.addWidget(view)
    view.show()
    qdoc.select(Selection("instruction", 6))
    assert view.current_span() is qdoc.doc.span_of(Selection("instruction", 6))
    qdoc.select(Selection("param", 2))
    assert view.current_span() in qdoc.doc.spans_of(Selection("param", 2))
    # user clicks a field row: the document selects that field and follows its tick
    field = qdoc.nac.spans.find("OPS/instr[9]/A")
    view.tree.setCurrentIndex(view.model.index_of(field))
    assert qdoc.selection == Selection("span", "OPS/instr[9]/A")
    assert qdoc.tick == 9
    # a record row selects the record itself
    view.tree.setCurrentIndex(view.model.index_of(qdoc.nac.spans.find("CMAP/op[0]")))
    assert qdoc.selection.kind == "cmap"
    view.tree.setCurrentIndex(view.model.index_of(qdoc.nac.spans.find("DATA")))
    assert qdoc.selection == Selection("section", "DATA")


def test_property_model_passes_qmodeltester(qtmodeltester):
    model = PropertyModel()
    qtmodeltester.check(model)
    model.set_groups([("A", [("x", 1), ("y", "two")]), ("Empty", []), ("B", [("z", None)])])
    qtmodeltester.check(model)
    assert model.rowCount() == 2   # empty groups are dropped
    assert model.value("B", "z") == ""


def test_properties_describe_an_instruction(qdoc_for, demo_path, qtbot, qtmodeltester):
    qdoc = qdoc_for(demo_path)
    view = PropertiesView(qdoc)
    qtbot.addWidget(view)
    nac = qdoc.nac
    linear = next(i for i in nac.instructions if nac.instruction_name(i) == "aten.linear.default")
    qdoc.select(Selection("instruction", linear.index))
    qtmodeltester.check(view.model)
    assert view.heading.text() == f"t{linear.index} · aten.linear.default"
    prod = linear.index + linear.d[0]
    assert view.model.value("Arguments", "0 · T tensor") == f"v{prod} ({nac.instruction_name(nac.instructions[prod])})"
    consumers = [i.index for i in nac.instructions if linear.index in i.producers()]
    groups = dict(view.model.groups())
    assert [k for k, _ in groups["Consumers"]] == [f"t{c}" for c in consumers]


def _largest_weight_with_stats(qdoc_for, demo_path, qtbot):
    """A properties view showing the demo's largest parameter, its statistics computed."""
    qdoc = qdoc_for(demo_path)
    view = PropertiesView(qdoc)
    qtbot.addWidget(view)
    p = max(qdoc.nac.params.values(), key=lambda p: p.data_length)
    qdoc.select(Selection("param", p.id))
    qtbot.waitUntil(lambda: view.stats is not None, timeout=5000)
    return qdoc, view, p


def test_properties_stats_match_numpy(qdoc_for, demo_path, qtbot):
    _qdoc, view, p = _largest_weight_with_stats(qdoc_for, demo_path, qtbot)
    arr = p.array().astype(np.float64)
    s = view.stats
    assert s["count"] == arr.size
    assert s["min"] == pytest.approx(arr.min()) and s["max"] == pytest.approx(arr.max())
    assert s["mean"] == pytest.approx(arr.mean(), rel=1e-9, abs=1e-12)
    assert s["std"] == pytest.approx(arr.std(), rel=1e-6)
    counts, edges = s["hist"]
    assert counts.sum() == arr.size
    np.testing.assert_array_equal(counts, np.histogram(arr, bins=edges)[0])
    assert view.model.value("Statistics", "Min") is not None
    assert view.plot is not None and not view.plot.isHidden()


def test_theme_switch_recolours_statistics_without_recomputing(qdoc_for, demo_path, qtbot, qapp):
    """A theme switch redraws the panel's icons and histogram in the new palette; the
    parameter's statistics stay, not asked of the engine host again."""
    from nac_studio.theme import dark_palette, light_palette
    qdoc, view, _p = _largest_weight_with_stats(qdoc_for, demo_path, qtbot)
    stats = view.stats
    light_bg = view.plot.backgroundBrush().color().name()
    submitted = []
    original = qdoc.host.request
    qdoc.host.request = lambda *a, **k: submitted.append(a[0]) or original(*a, **k)
    try:
        qapp.setPalette(dark_palette())
        qapp.processEvents()   # the palette reaches widgets through posted events
        view.retint()
        assert submitted == [] and (view._stats_task is None or view._stats_task.done())
        assert view.stats is stats
        assert view.model.value("Statistics", "Min") is not None
        assert not view.plot.isHidden()
        assert view.plot.backgroundBrush().color().name() != light_bg
        # another parameter still gets its statistics computed
        other = min(qdoc.nac.params.values(), key=lambda q: q.data_length)
        qdoc.select(Selection("param", other.id))
        assert submitted, "a new selection must start its statistics"
    finally:
        qdoc.host.request = original
        qapp.setPalette(light_palette())


def test_tensor_stats_counts_nan_inf_and_zeros():
    a = np.array([0.0, 1.0, -2.0, np.nan, np.inf, 0.0], np.float32)
    s = tensor_stats(None, lambda: a, bins=4)
    assert (s["nan"], s["inf"], s["zeros"], s["finite"]) == (1, 1, 2, 4)
    assert (s["min"], s["max"]) == (-2.0, 1.0)
    assert s["hist"][0].sum() == 4


def test_tensor_stats_histogram_counts_values_on_bin_edges_as_numpy_does(monkeypatch):
    """The equal-width histogram (numpy's arithmetic path) counts exactly as the explicit
    edges would, values lying on the edges included, across chunks."""
    rng = np.random.default_rng(7)
    base = rng.standard_normal(5000).astype(np.float32) * 3
    edges = np.linspace(float(base.min()), float(base.max()), 65)
    a = np.concatenate([base, edges.astype(np.float32), np.float32(edges[10]) * np.ones(7, np.float32)])
    from nac_studio.model import tensor_stats as stats_module
    monkeypatch.setattr(stats_module, "STATS_CHUNK", 1000)     # six chunks
    s = tensor_stats(None, lambda: a, bins=64)
    counts, got_edges = s["hist"]
    assert counts.sum() == a.size
    np.testing.assert_array_equal(counts, np.histogram(a.astype(np.float64), bins=got_edges)[0])
    assert s["std"] == pytest.approx(a.astype(np.float64).std(), rel=1e-9)


def test_stats_of_a_stale_selection_are_dropped(qdoc_for, demo_path, qtbot):
    qdoc = qdoc_for(demo_path)
    view = PropertiesView(qdoc)
    qtbot.addWidget(view)
    p = next(iter(qdoc.nac.params.values()))
    qdoc.select(Selection("param", p.id))
    task = view._stats_task
    qdoc.select(Selection("instruction", 0))
    if task is not None:
        qtbot.waitUntil(task.done, timeout=5000)
    qtbot.wait(20)
    assert view.stats is None and view.heading.text().startswith("t0")


def test_data_inspector_reads_every_scalar_type():
    import struct
    buf = struct.pack("<f", 1.5) + b"\x00" * 12
    rows = dict(inspect_bytes(buf, 0))
    assert rows["f32"] == "1.5"
    assert rows["u8"] == str(buf[0])
    assert "f64" in rows and "bf16" in rows
    assert "u64" not in dict(inspect_bytes(buf, 12))   # not enough bytes left


def test_problems_model_and_click_to_location(qtmodeltester, qdoc_for, demo_path, qtbot, tmp_path):
    bad = tmp_path / "bad.nac"
    data = bytearray(demo_path.read_bytes())
    bad.write_bytes(bytes(data[:len(data) - 40]))
    qdoc = qdoc_for(bad)
    assert qdoc.doc.problems
    model = ProblemsModel()
    model.set_problems(qdoc.doc.problems)
    qtmodeltester.check(model)
    view = ProblemsView(qdoc)
    qtbot.addWidget(view)
    assert view.count() == len(qdoc.doc.problems)
    view.go_to_row(0)
    p = view.model.problem(view.proxy.mapToSource(view.table.currentIndex()).row())
    assert qdoc.selection == Selection("offset", p.offset)
    view.filter.setText("zzz-no-such-text")
    assert view.proxy.rowCount() == 0
