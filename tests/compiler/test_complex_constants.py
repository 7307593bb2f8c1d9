"""Complex constants (issue 15 §1): RoPE written with ``torch.polar`` compiles with the optimiser
on (the folded table is stored as real pairs and read back with view_as_complex) as with it off,
and a complex buffer of the model is stored the same way; outputs match eager."""
from __future__ import annotations

import torch

from tests.compiler.helpers import compile_and_check


def _freqs(seq=6, dim=8):
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    return torch.outer(torch.arange(seq).float(), inv)


class PolarInForward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("freqs", _freqs(), persistent=False)

    def forward(self, x):
        cis = torch.polar(torch.ones_like(self.freqs), self.freqs)
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * cis).flatten(2)


class ComplexBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        f = _freqs()
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(f), f), persistent=False)

    def forward(self, x):
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * self.freqs_cis).flatten(2)


def _pairs_params(nac):
    return [p for p in nac.params.values() if p.name.endswith(".real_pairs")]


def test_polar_folds_to_real_pairs():
    c = compile_and_check(PolarInForward(), (torch.randn(1, 6, 8),))
    assert max(c.rel_errors) == 0.0
    (p,) = _pairs_params(c.nac)
    assert p.name.startswith("_folded.") and p.dtype == "float32" and tuple(p.shape) == (6, 4, 2)
    names = [c.nac.instruction_name(i) for i in c.nac.instructions]
    assert "aten.polar.default" not in names and "aten.view_as_complex.default" in names


def test_polar_without_the_optimiser_still_compiles_exactly():
    c = compile_and_check(PolarInForward(), (torch.randn(1, 6, 8),), optimize=False)
    assert max(c.rel_errors) == 0.0 and not _pairs_params(c.nac)


def test_a_complex_buffer_is_stored_as_real_pairs():
    for optimize in (True, False):
        c = compile_and_check(ComplexBuffer(), (torch.randn(1, 6, 8),), optimize=optimize)
        assert max(c.rel_errors) == 0.0
        (p,) = _pairs_params(c.nac)
        assert p.name == "freqs_cis.real_pairs" and tuple(p.shape) == (6, 4, 2)
