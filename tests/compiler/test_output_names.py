"""Outputs keep the names forward returned them under (nac_engine/format/output_names.py)."""
from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import nac_engine
from nac_engine.cli import main
from nac_engine.compiler.external import write_compiled
from nac_engine.errors import NacFormatError
from nac_engine.format.model import Resource
from nac_engine.format.output_names import RESOURCE_NAME, read_output_names
from nac_engine.format.reader import read


class DictOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 3), nn.Linear(4, 2)

    def forward(self, x):
        return {"logits": self.a(x), "aux": (self.b(x), x.mean())}


def _compiled(tmp_path, model, name):
    torch.manual_seed(0)
    path = tmp_path / f"{name}.nac"
    write_compiled(nac_engine.compile(model.eval(), (torch.randn(2, 4),)), str(path))
    return path


def test_a_dict_of_outputs_is_named_in_run_and_info(tmp_path, capsys):
    path = _compiled(tmp_path, DictOut(), "dict")
    with read(str(path)) as nac:
        assert read_output_names(nac) == ["logits", "aux.0", "aux.1"]
    assert main(["run", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in lines[:3]] == ["output 0 (logits)", "output 1 (aux.0)", "output 2 (aux.1)"]
    assert main(["info", str(path)]) == 0
    assert "logits  (aten.linear.default)" in capsys.readouterr().out
    assert main(["info", "--json", str(path)]) == 0
    assert [o["name"] for o in json.loads(capsys.readouterr().out)["outputs"]] == ["logits", "aux.0", "aux.1"]


def test_a_single_tensor_needs_no_name_and_a_damaged_record_leaves_them_unnamed(tmp_path, capsys):
    path = _compiled(tmp_path, nn.Linear(4, 2), "plain")
    with read(str(path)) as nac:
        assert read_output_names(nac) is None and all(r.name != RESOURCE_NAME for r in nac.rsrc)
    path = _compiled(tmp_path, DictOut(), "damaged")
    with read(str(path)) as nac:
        nac.rsrc = [r for r in nac.rsrc if r.name != RESOURCE_NAME] + [
            Resource(RESOURCE_NAME, _payload=json.dumps({"version": 1, "names": ["only one"]}).encode())]
        with pytest.raises(NacFormatError, match="1 names for 3 outputs"):
            read_output_names(nac)
        nac_engine.format.write(nac, str(tmp_path / "damaged2.nac"))
    assert main(["run", str(tmp_path / "damaged2.nac")]) == 0
    assert capsys.readouterr().out.startswith("output 0: ")


def test_the_names_label_the_outputs_in_nac_diff_and_the_editors_debug_console(tmp_path, capsys):
    from tests.dap.dap_client import DapClient
    path = _compiled(tmp_path, DictOut(), "dict")
    assert main(["diff", str(path), str(path)]) == 0
    assert "output 2 (aux.1)" in capsys.readouterr().out
    client = DapClient(cwd=str(tmp_path))
    try:
        assert client.start({"program": str(path)})["success"]
        client.wait_event("terminated")
        outputs = [m["body"]["output"] for m in client.received if m.get("event") == "output"]
        assert any(o.startswith("output 0 (logits): f32[2,3]") for o in outputs), outputs
    finally:
        client.close()
