"""Small hand-written models, end to end: compiled file verifies, lints clean and matches eager."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from nac_engine.format import layout as L
from tests.compiler.helpers import compile_and_check


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(8 * 4 * 4, 10)
        with torch.no_grad():    # non-trivial statistics, so eval-mode batch norm does something
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(torch.relu(self.bn(self.conv(x)))), 1))


class AttentionBlock(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + self.drop(a)
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_mlp_end_to_end():
    x = torch.randn(3, 8)
    c = compile_and_check(MLP(), (x,))
    nac = c.nac
    h = nac.header
    assert (h.version, h.num_inputs, h.num_outputs, h.d_model, h.weights_internal) == ("1.6", 1, 1, 16, True)
    assert [n.name for n in nac.input_names] == ["x"]
    assert [p.name for p in nac.params.values()] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                                     "fc3.weight", "fc3.bias"]
    names = [nac.instruction_name(i) for i in nac.instructions]
    assert names == ["input", "param", "param", "aten.linear.default", "aten.relu.default", "param", "param",
                     "aten.linear.default", "aten.relu.default", "param", "param", "aten.linear.default", "return"]
    assert nac.signature(nac.instructions[3]) == "TWB"
    assert c.rel_errors == [0.0]


def test_mlp_weights_are_the_models():
    torch.manual_seed(1)
    m = MLP()
    c = compile_and_check(m, (torch.randn(2, 8),))
    for p in c.nac.params.values():
        assert np.array_equal(p.array(), dict(m.named_parameters())[p.name].detach().numpy())


def test_cnn_conv_batchnorm_relu_maxpool_linear():
    c = compile_and_check(CNN(), (torch.randn(2, 3, 8, 8),))
    ops = {c.nac.instruction_name(i) for i in c.nac.instructions}
    assert {"aten.conv2d.default", "aten._native_batch_norm_legit_no_training.default", "aten.relu.default",
            "aten.max_pool2d.default", "aten.linear.default"} <= ops
    # num_batches_tracked is read by nothing: it is not in the file
    assert not any("num_batches_tracked" in p.name for p in c.nac.params.values())
    assert {"bn.running_mean", "bn.running_var"} <= {p.name for p in c.nac.params.values()}


def test_multihead_attention_layernorm_gelu_block():
    c = compile_and_check(AttentionBlock(), (torch.randn(2, 5, 16),))
    ops = {c.nac.instruction_name(i) for i in c.nac.instructions}
    assert "aten.scaled_dot_product_attention.default" in ops and "aten.gelu.default" in ops
    assert "aten.clone.default" not in ops and "nac.clone" not in ops     # dropout/contiguous copies removed
    assert c.nac.header.d_model == 16


@pytest.mark.parametrize("version", ["1.6", "1.8"])
def test_versions_use_their_standard_op_ids(version):
    class M(nn.Module):
        def forward(self, x, y):
            return (x * y + x).transpose(0, 1)
    c = compile_and_check(M(), (torch.randn(3, 4), torch.randn(3, 4)), version=version)
    nac = c.nac
    assert nac.header.version == version
    by_name = {nac.instruction_name(i): i.a for i in nac.instructions}
    assert by_name["nac.add"] == 11
    if version == "1.8":
        assert (by_name["nac.mul"], by_name["nac.transpose"]) == (20, 23) and nac.cmap == {}
        assert nac.perms[0] == ""
    else:      # v1.6 has no standard mul/transpose: they are CMAP entries from 20 on
        assert nac.cmap == {20: "nac.mul", 21: "nac.transpose"}
        assert 0 not in nac.perms


def test_external_weights_flag_and_quantised_compile_reports_error():
    c = compile_and_check(MLP(), (torch.randn(2, 8),), weights="external")
    assert c.nac.header.weights_internal is False
    from nac_engine.compiler import compile_model
    res = compile_model(MLP(), (torch.randn(2, 8),), quantization="int8_channel")
    assert res.nac.header.quant_method == L.QUANT_INT8_CHANNEL
    weights = [q for q in res.report.quant if q.name.endswith("weight")]
    assert len(weights) == 3 and all(0 < q.rel_error < 0.01 for q in weights)


def test_optimize_off_keeps_the_exported_graph_and_the_report_says_what_passes_did():
    from nac_engine.compiler.report import format_report
    x = torch.randn(2, 5, 16)
    block = AttentionBlock()
    raw = compile_and_check(block, (x,), optimize=False)
    opt = compile_and_check(block, (x,))
    assert raw.result.report.passes == [] and raw.nac.instructions.__len__() == raw.result.report.instructions_exported
    assert len(opt.nac.instructions) < len(raw.nac.instructions)
    rep = opt.result.report
    assert rep.instructions_exported == len(raw.nac.instructions)
    assert sum(s.before - s.after for s in rep.passes) == rep.instructions_exported - rep.instructions
    text = format_report(rep)
    assert "identities" in text and f"{rep.instructions_exported} exported -> {rep.instructions}" in text
    assert "min-peak" in text and "reference" in text


class _Lists(nn.Module):
    def forward(self, a, b, i):
        return torch.cat([a, b, a], 1), torch.stack([a, b]), a[:, i]


def test_tensor_lists_are_flattened_one_slot_per_tensor():
    from nac_engine.compiler import compile_model
    nac = compile_model(_Lists(), (torch.randn(2, 3), torch.randn(2, 3), torch.tensor([2, 0])), version="1.8").nac
    by_name = {nac.instruction_name(i): i for i in nac.instructions}
    cat = by_name["aten.cat.default"]
    assert nac.signature(cat) == "TTTA" and cat.d[:3] == (-3, -2, -3) and cat.d[3] == 0
    assert nac.signature(by_name["aten.stack.default"]) == "TT"          # dim=0 is the default: not written
    assert nac.signature(by_name["aten.index.Tensor"]) == "TcT"      # a[:, i] = index(a, [None, i])


def test_tensor_lists_run():
    compile_and_check(_Lists(), (torch.randn(2, 3), torch.randn(2, 3), torch.tensor([2, 0])))
