"""The binary peer formats in the Studio: every hwx/NEFF/TVMR sample opens through
MainWindow.open_path (as drag and drop does) with structure, hex, graph and the Details pane
populated and NAC-only panes covered; NEFF members export atomically, .npy constants get
statistics off the UI thread; an E5 descriptor built by flatbuffers opens too."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QModelIndex

from nac_studio.peer_views import covered_text
from tests.corpus_paths import CORPUS
from tests.peers.test_e5 import build as build_e5
from tests.studio.conftest import wait_idle

PEERS = CORPUS / "peers"
SAMPLES = ([*sorted((PEERS / "ane").glob("*.hwx")), *sorted((PEERS / "neff").glob("*.neff")),
            *sorted((PEERS / "tvmr" / "synthesized").glob("*.tvmr"))] if PEERS.is_dir() else [])


@pytest.mark.skipif(not SAMPLES, reason="shared corpus absent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sample_opens_with_structure_hex_graph_details(window, qtbot, path):
    qdoc = window.open_and_wait(path)
    doc = qdoc.doc
    assert doc.peer is not None and doc.peer.size == path.stat().st_size
    assert window.structure_view.model.rowCount(QModelIndex()) >= 2
    assert covered_text(window.views["hex"]) is None
    g = window.graph.shown
    assert g is not None and g.n_nodes >= 2 and g.n_edges >= 1
    details = window.views["peer_details"]
    assert details.tree.topLevelItemCount() >= 1 or doc.peer.details() == []
    assert "Not available for" in covered_text(window.views["disassembly"])
    # selecting a graph node that owns bytes selects them in the hex view
    spanned = [i for i, n in enumerate(g.nodes) if getattr(n, "span", None)]
    if spanned:
        window.select(g.nodes[spanned[0]].selection())
        assert window.hex_view.area.highlights()


@pytest.mark.skipif(not (PEERS / "neff" / "matmul_small.neff").is_file(), reason="shared corpus absent")
def test_neff_member_export_and_constant_statistics(window, qtbot, tmp_path):
    qdoc = window.open_and_wait(PEERS / "neff" / "matmul_small.neff")
    details = window.views["peer_details"]
    archive = next(details.tree.topLevelItem(i) for i in range(details.tree.topLevelItemCount())
                   if details.tree.topLevelItem(i).text(0) == "archive")
    archive.setExpanded(True)
    names = [archive.child(i).text(0) for i in range(archive.childCount())]
    assert len(names) == 72 and "neff.json" in names
    npy = archive.child(names.index("sg00/value_sg0000_identity_82_CRSM.npy"))
    details.tree.setCurrentItem(npy)
    assert details.export_button.isEnabled()
    qtbot.waitUntil(lambda: "min " in details.info.text(), timeout=10000)
    assert "float16[128, 128, 1, 1]" in details.info.text()
    out = tmp_path / "identity.npy"
    n = details.export_member(npy.text(0), str(out))
    assert n == out.stat().st_size
    arr = np.load(out, allow_pickle=False)
    assert arr.shape == (128, 128, 1, 1) and float(arr.reshape(128, 128).trace()) == 128.0
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".npy") == ["identity.npy"]   # no temp left
    wait_idle(qtbot, window, 5000)


def test_e5_descriptor_opens(window, qtbot, tmp_path):
    path = tmp_path / "program.e5"
    path.write_bytes(build_e5())
    qdoc = window.open_and_wait(path)
    assert qdoc.doc.peer.format == "e5" and qdoc.doc.problems == []
    assert window.graph.shown is not None and window.graph.shown.n_nodes == 2
    assert window.views["peer_details"].tree.topLevelItemCount() == 4
