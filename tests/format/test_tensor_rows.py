"""``tensor_rows.value_rows``: rows of a weight equal the same rows of ``array()``, for every way
a weight is stored (the file's private buffer, a mapped file, external .safetensors, a compiled
model's payload) and every encoding (float32, fp16, int8 per tensor and per channel, block fp8)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nac_engine
from nac_engine import read
from nac_engine.compiler.external import write_compiled
from nac_engine.format import reader as reader_module
from nac_engine.format.tensor_rows import value_rows, value_shape

SLICES = [(0, 37, 1), (5, 90, 7), (3, 4, 1), (0, 96, 40), (90, 200, 1), (50, 50, 1)]


def model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 80)).eval()


def check_rows(nac):
    seen = 0
    for p in nac.params.values():
        whole = p.array()
        assert value_shape(p) == whole.shape
        if whole.ndim == 0:
            continue
        for start, stop, step in SLICES:
            got = value_rows(p, start, stop, step)
            assert got.dtype == whole.dtype
            np.testing.assert_array_equal(got, whole[start:stop:step])
        seen += 1
    assert seen >= 2


@pytest.mark.parametrize("quant", [None, "fp16", "int8_tensor", "int8_channel", "block_fp8"])
def test_rows_of_every_encoding_read_whole_or_mapped(tmp_path, monkeypatch, quant):
    nac = nac_engine.compile(model(), (torch.randn(1, 64),), quantization=quant)
    check_rows(nac)                                   # the compiled payloads
    path = tmp_path / "m.nac"
    nac_engine.write(nac, path)
    with read(path) as private:
        assert private.private_buffer
        check_rows(private)
    monkeypatch.setattr(reader_module, "WHOLE_READ_MAX", 0)
    with read(path) as mapped:
        assert not mapped.private_buffer
        check_rows(mapped)


def test_rows_of_external_weights_read_only_those_rows(tmp_path, monkeypatch):
    nac = nac_engine.compile(model(), (torch.randn(1, 64),), weights="external")
    path = tmp_path / "e.nac"
    write_compiled(nac, path)
    with read(path) as ext:
        assert ext.weights_path and all(p.data_offset < 0 for p in ext.params.values())
        check_rows(ext)
        # a stride of big rows reads row by row: the bytes read are the rows asked for
        from nac_engine.format import mapped
        sizes = []
        real = mapped.pread_aligned
        monkeypatch.setattr(mapped, "pread_aligned", lambda fd, off, n: sizes.append(n) or real(fd, off, n))
        monkeypatch.setattr("nac_engine.format.tensor_rows._GAP_BYTES", 0)
        from nac_engine.format import safetensors_file
        opens = []
        real_open = safetensors_file.open_regular
        monkeypatch.setattr(safetensors_file, "open_regular", lambda *a, **k: opens.append(a[0]) or real_open(*a, **k))
        w = next(p for p in ext.params.values() if value_shape(p) == (80, 96))
        value_rows(w, 0, 80, 20)
        assert sizes == [96 * 4] * 4
        # ... through one descriptor: a heatmap's 1,024 strided rows of an LLM's embedding opened
        # the file 1,024 times, and each system call waited behind the engine host's busy lanes
        assert len(opens) == 1
