"""Studio readable forms of a shared constant (issue 15 §1): the value as the op uses it, with
the stored form beside it, in the properties panel as in the disassembly."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from nac_studio.model.document import Selection  # noqa: E402
from nac_studio.views.properties import PropertiesView  # noqa: E402


def test_properties_show_a_dim_stored_as_float_as_the_int_it_is(qdoc_for, corpus_case, qtbot):
    qdoc = qdoc_for(corpus_case("consts_mixed"))
    view = PropertiesView(qdoc)
    qtbot.addWidget(view)
    qdoc.select(Selection("instruction", 8))          # aten.cat.default(v4, v7, 1.0)<TTA>
    args = dict(dict(view.model.groups())["Arguments"])
    dim = next(v for k, v in args.items() if k.startswith("2 · A"))
    assert dim.endswith("= 1 (stored 1.0)")
    qdoc.select(Selection("instruction", 1))          # nac.add(v0, 1.0): stored as used
    args = dict(dict(view.model.groups())["Arguments"])
    assert next(v for k, v in args.items() if k.startswith("1 · f")).endswith("= 1.0")


def test_graph_constant_nodes_show_the_used_value(corpus_case):
    from nac_engine import read
    from nac_studio.model.graph_model import build_graph
    with read(str(corpus_case("consts_mixed"))) as nac:
        g = build_graph(nac, show_consts=True)
        texts = [n.op for n in g.nodes if n.kind == "const" and n.tick == 8]
    assert texts == ["1 (stored 1.0)"]


def test_graph_node_attributes_use_the_coerced_values(corpus_case):
    from nac_engine import read
    from nac_studio.model.graph_labels import node_attributes
    with read(str(corpus_case("consts_mixed"))) as nac:
        assert node_attributes(nac, nac.instructions[9]) == "dim=[1] · keepdim=True"   # keepdim stored 1.0
    with read(str(corpus_case("transpose_kw__torch2.13"))) as nac:
        assert node_attributes(nac, nac.instructions[4]) == "dim0=1 · dim1=0"          # dim1 stored False
