"""Every peer sample in the corpus through the CLI: `nac info --json` names its format, `nac span`
answers for its first and last byte, `nac verify` runs; detection is by magic bytes first."""
from __future__ import annotations

import json

import pytest

from nac_engine.cli import main
from nac_engine.peers import detect
from tests.corpus_paths import CORPUS

PEERS = CORPUS / "peers"
EXPECTED = {"ane": ("*.hwx", "hwx"), "neff": ("*.neff", "neff"), "tvmr": ("synthesized/*.tvmr", "tvmr"),
            "mind": ("*.ir", "mind")}
CASES = [(p, fmt) for folder, (pattern, fmt) in EXPECTED.items()
         for p in sorted((PEERS / folder).glob(pattern))] if PEERS.is_dir() else []


@pytest.mark.skipif(not CASES, reason="shared corpus absent")
@pytest.mark.parametrize("path,fmt", CASES, ids=lambda v: getattr(v, "name", v))
def test_info_span_verify(path, fmt, capsys):
    assert main(["info", "--json", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == fmt and info["size"] == path.stat().st_size
    for off in (0, path.stat().st_size - 1):
        assert main(["span", str(path), str(off), "--json"]) == 0
        span = json.loads(capsys.readouterr().out)
        assert span["leaf"]["offset"] <= off < span["leaf"]["offset"] + span["leaf"]["length"]
    assert main(["verify", str(path)]) in (0, 1)
    capsys.readouterr()


def test_detection_prefers_magic_over_extension():
    assert detect(b"NAC\x01" + bytes(60), "model.neff") == "nac"
    assert detect(b"\xce\xfa\xef\xbe" + bytes(60), "x.bin") == "hwx"
    assert detect(b"", "x.hwx") == "hwx" and detect(b"", "x.unknown") is None


@pytest.mark.skipif(not CASES, reason="shared corpus absent")
@pytest.mark.parametrize("path,fmt", CASES, ids=lambda v: getattr(v, "name", v))
def test_details_rows_are_words_not_python_reprs(path, fmt):
    """The Studio's Details pane shows a row's value as text: a JSON object or list read from the
    file is child rows (NEFF variables, queues, DMA entries and the header's lists were shown as
    ``{'type': 'state-buffer', 'var_id': 0}``)."""
    from nac_engine.peers import open_peer

    def walk(items):
        for d in items:
            assert not isinstance(d.value, (dict, list, tuple)), (d.name, d.value)
            walk(d.children)
    walk(open_peer(str(path)).details() or [])


def test_a_json_value_becomes_rows_and_a_long_list_is_cut():
    from nac_engine.peers import DetailItem
    from nac_engine.peers.base import DETAIL_ITEMS_MAX
    row = DetailItem.of("SB", {"type": "state-buffer", "shape": [128, 2], "ops": [], "deep": {"a": [{"b": 1}]}})
    assert (row.value, [(c.name, c.value) for c in row.children[:3]]) == (
        "4 fields", [("type", "state-buffer"), ("shape", "128, 2"), ("ops", "(none)")])
    deep = row.children[3]
    assert (deep.value, deep.children[0].value, deep.children[0].children[0].children[0].value) == \
        ("1 field", "1 item", 1)
    long = DetailItem.of("list", list(range(DETAIL_ITEMS_MAX + 5)))
    assert long.value == f"{DETAIL_ITEMS_MAX + 5:,} items" and len(long.children) == DETAIL_ITEMS_MAX + 1
    assert long.children[-1].name == "… 5 more"
