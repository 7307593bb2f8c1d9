"""A model with -inf / finfo.min mask buffers, quantised, internal and external weights: the masks
stay float (and the report says so), the file writes and the outputs match PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from nac_engine.compiler.report import format_report
from tests.compiler.helpers import compile_and_check


class Masked(nn.Module):
    """/tmp/review/quant_mask.py"""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.register_buffer("mask", torch.triu(torch.full((6, 6), float("-inf")), 1))
        self.register_buffer("mask_min", torch.triu(torch.full((6, 6), torch.finfo(torch.float32).min), 1))

    def forward(self, x):
        a = self.lin(x) @ x.transpose(-1, -2)
        return (a + self.mask).softmax(-1), (a + self.mask_min).softmax(-1)


@pytest.mark.parametrize("weights", ["internal", "external"])
@pytest.mark.parametrize("method, tol", [("fp16", 1e-3), ("int8_tensor", 3e-2), ("int8_channel", 3e-2),
                                         ("block_fp8", 3e-2)])
def test_masks_stay_float_and_the_model_is_right(method, tol, weights):
    torch.manual_seed(0)
    c = compile_and_check(Masked(), (torch.randn(6, 8),), tol=tol, quantization=method, weights=weights)
    assert all(np.isfinite(o).all() for o in c.outputs)
    reports = {r.name: r for r in c.result.report.quant}
    kept = {"mask_min"} if method == "fp16" else {"mask", "mask_min"}
    assert {n for n, r in reports.items() if r.skipped} == kept
    assert reports["lin.weight"].stored_as != "none" and not reports["lin.weight"].skipped
    for name in kept:
        p = c.nac.param_by_name(name)
        assert p.meta.quant == 0 and p.meta.dtype == 0
    text = format_report(c.result.report)
    assert f"{len(kept)} float tensor(s) not quantised" in text and "mask_min" in text
