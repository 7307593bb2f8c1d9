"""Edge shapes: the file's parameter shapes at once, every value's from the meta pass."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nac_studio.model.graph_model import build_graph  # noqa: E402
from tests.resources_path import DEMO  # noqa: E402
from nac_studio.model.graph_shapes import file_shapes, node_shape_labels, propagated_shapes, shape_label  # noqa: E402

TIMEOUT = 60000


def test_shape_label():
    assert shape_label("float32", (1, 16, 768)) == "f32[1,16,768]"
    assert shape_label("torch.int64", [1, 16]) == "i64[1,16]"
    assert shape_label("float32", ()) == "f32[]"


def test_file_shapes_are_the_parameter_records(demo_path):
    import nac_engine
    nac = nac_engine.read(str(demo_path))
    shapes = file_shapes(nac)
    params = [ins for ins in nac.instructions if ins.a == 2 and ins.b == 1]
    assert params and len(shapes) == len(params)
    for ins in params:
        p = nac.param_for(ins)
        assert shapes[ins.index] == shape_label(p.dtype, p.shape)
    g = build_graph(nac)
    labels = node_shape_labels(g, shapes)
    assert labels and all(g.nodes[i].kind == "param" for i in labels)


def test_propagated_shapes_match_a_real_run():
    """The meta pass's shapes equal those of the interpreter's real outputs (the demo CNN
    records its input signature)."""
    import nac_engine
    from nac_engine.format.input_signature import read_input_signature, signature_inputs
    demo_path = DEMO.parent / "demo_cnn.nac"
    if not demo_path.is_file():
        pytest.skip("demo CNN missing")
    nac = nac_engine.read(str(demo_path))
    if not read_input_signature(nac):
        pytest.skip("demo model has no input signature")
    shapes = propagated_shapes(nac)
    assert len(shapes) > len(file_shapes(nac))
    outs = nac_engine.run(str(demo_path), inputs=signature_inputs(nac))
    last = max(t for t in shapes)     # a return's producer: the model's output
    ret = [ins for ins in nac.instructions if ins.a == 3][0]
    prod = ret.producers()[0]
    assert shapes[prod] == shape_label(str(np.asarray(outs[0]).dtype), np.asarray(outs[0]).shape)
    assert last >= prod


def test_view_shows_shapes_under_nodes(qtbot, qdoc_for, demo_path):
    from nac_studio.views.graph import GraphView
    qdoc = qdoc_for(demo_path)
    v = GraphView(qdoc)
    qtbot.addWidget(v)
    v.resize(1000, 760)
    v.show()
    qtbot.waitUntil(lambda: v.layout_ is not None, timeout=TIMEOUT)
    assert v.canvas.edge_labels         # the file's at once
    at_once = len(v.canvas.edge_labels)
    qtbot.waitUntil(lambda: qdoc.doc in v._shapes, timeout=TIMEOUT)
    assert len(v.canvas.edge_labels) >= at_once
    node = next(iter(v.canvas.edge_labels))
    v.canvas.center_on(node, zoom=1.0)
    v.canvas.repaint()
    assert any(t == v.canvas.edge_labels[node] for t, _r in v.canvas.text_items())


def test_hidden_weights_fold_into_their_consumer_as_attributes(demo_path):
    import nac_engine
    nac = nac_engine.read(str(demo_path))
    g = build_graph(nac, show_params=False)
    readers = [nd for nd in g.nodes if nd.params]
    assert readers
    for nd in readers:
        for pid in nd.params:
            p = nac.params[pid]
            assert f"{p.name.rsplit('.', 1)[-1]}[{'×'.join(str(d) for d in p.shape)}]" in nd.detail
    shown = build_graph(nac, show_params=True)
    assert not any(nd.params for nd in shown.nodes)
