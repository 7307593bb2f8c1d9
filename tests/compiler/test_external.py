"""External weights: every quantisation method round-trips through ``<base>.safetensors`` and the
model computes exactly what the internal-weights file computes."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import nac_engine
from nac_engine.compiler import external as E
from nac_engine.compiler.external import METADATA_KEY, weights_path_for, write_compiled
from nac_engine.compiler.quantize import quantize_parameters
from nac_engine.format import read, safetensors_file
from nac_engine.format.deferred_values import DeferredValues
from nac_engine.format.model import NacFile, Parameter, TensorMeta

METHODS = ["none", "fp16", "int8_tensor", "int8_channel", "block_fp8"]


def _compiled(corpus_case, method: str) -> NacFile:
    nac = read(str(corpus_case("cnn")))
    quantize_parameters(nac, method)
    return nac


@pytest.mark.parametrize("method", METHODS)
def test_internal_and_external_agree(corpus_case, tmp_path, method):
    path = corpus_case("cnn")
    feeds = [np.load(path.parent / "feed_0.npy")]
    nac = _compiled(corpus_case, method)
    assert write_compiled(nac, tmp_path / "in.nac") == [str(tmp_path / "in.nac")]
    nac.header.weights_internal = False
    written = write_compiled(nac, tmp_path / "ext.nac")
    assert written == [str(tmp_path / "ext.safetensors"), str(tmp_path / "ext.nac")]
    inside, outside = read(str(tmp_path / "in.nac")), read(str(tmp_path / "ext.nac"))
    assert not outside.header.weights_internal and outside.header.quant_method == inside.header.quant_method
    assert os.path.getsize(tmp_path / "ext.nac") < os.path.getsize(tmp_path / "in.nac")
    for p in inside.params.values():
        q = outside.param_by_name(p.name)
        a, b = p.array(), q.array()
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), p.name
        assert q.meta.quant == p.meta.quant, p.name
    out_in = nac_engine.run(inside, feeds=feeds)
    out_ext = nac_engine.run(outside, feeds=feeds)
    assert all(np.array_equal(x, y) for x, y in zip(out_in, out_ext))


def test_metadata_is_the_key_the_reference_runtime_reads(corpus_case, tmp_path):
    from safetensors import safe_open
    nac = _compiled(corpus_case, "int8_channel")
    nac.header.weights_internal = False
    write_compiled(nac, tmp_path / "m.nac")
    with safe_open(str(tmp_path / "m.safetensors"), framework="numpy") as f:
        md = f.metadata()
        stored = {k: f.get_tensor(k) for k in f.keys()}
    assert set(md) == {METADATA_KEY}
    quant = json.loads(md[METADATA_KEY])
    w, b = quant["conv1.weight"], quant["conv1.bias"]
    assert w["quant_type"] == "INT8_CHANNEL" and w["axis"] == 0 and len(w["scales"]) == 8
    assert b["quant_type"] == "INT8_TENSOR" and isinstance(b["scale"], float)
    assert np.array_equal(np.float32(w["scales"]), nac.param_by_name("conv1.weight").meta.scales)
    assert stored["conv1.weight"].dtype == np.int8 and stored["conv1.weight"].shape == (8, 3, 3, 3)


def test_block_fp8_is_stored_flat_and_padded(corpus_case, tmp_path):
    from safetensors import safe_open
    nac = _compiled(corpus_case, "block_fp8")
    nac.header.weights_internal = False
    write_compiled(nac, tmp_path / "b.nac")
    with safe_open(str(tmp_path / "b.safetensors"), framework="numpy") as f:
        t = f.get_tensor("conv1.weight")
        entry = json.loads(f.metadata()[METADATA_KEY])["conv1.weight"]
    assert t.shape == (256,) and entry["original_shape"] == [8, 3, 3, 3] and entry["block_size"] == 64


def test_fp16_and_float_tensors_carry_no_metadata(corpus_case, tmp_path):
    from safetensors import safe_open
    for method in ("none", "fp16"):
        nac = _compiled(corpus_case, method)
        nac.header.weights_internal = False
        write_compiled(nac, tmp_path / f"{method}.nac")
        with safe_open(str(tmp_path / f"{method}.safetensors"), framework="numpy") as f:
            assert not f.metadata()
            assert f.get_tensor("fc.weight").dtype == (np.float16 if method == "fp16" else np.float32)


def test_scales_survive_json_exactly(tmp_path):
    rng = np.random.default_rng(1)
    nac = NacFile()
    w = (rng.standard_normal((64, 33)) * np.logspace(-6, 3, 64)[:, None]).astype(np.float32)
    nac.params[1] = Parameter(1, "w", TensorMeta(0, w.shape, 0), _payload=w, _file=nac)
    for method in ("int8_channel", "block_fp8"):
        nac.header.quant_method = 0
        nac.params[1] = Parameter(1, "w", TensorMeta(0, w.shape, 0), _payload=w, _file=nac)
        quantize_parameters(nac, method)
        want = nac.params[1].array()
        nac.header.weights_internal = False
        write_compiled(nac, tmp_path / f"{method}.nac")
        assert np.array_equal(read(str(tmp_path / f"{method}.nac")).params[1].array(), want)


def test_bfloat16_is_widened_exactly(tmp_path):
    nac = NacFile()
    bits = np.array([0x3FC0, 0xC020, 0x7F7F], np.uint16)
    nac.params[1] = Parameter(1, "b", TensorMeta(3, (3,), 0), _payload=bits, _file=nac)
    nac.header.weights_internal = False
    write_compiled(nac, tmp_path / "bf.nac")
    got = read(str(tmp_path / "bf.nac")).params[1].array()
    assert got.dtype == np.float32 and np.array_equal(got, nac.params[1].array())


def test_reads_back_what_the_reference_wrote(corpus_case, tmp_path):
    """Re-writing the reference's own external file keeps the same weights."""
    nac = read(str(corpus_case("mlp_external")))
    want = {p.name: p.array() for p in nac.params.values()}
    write_compiled(nac, tmp_path / "again.nac")
    back = read(str(tmp_path / "again.nac"))
    assert {p.name for p in back.params.values()} == set(want)
    assert all(np.array_equal(p.array(), want[p.name]) for p in back.params.values())


def test_failed_save_leaves_old_files_and_no_temp(tmp_path, monkeypatch, corpus_case):
    nac = _compiled(corpus_case, "int8_tensor")
    nac.header.weights_internal = False
    write_compiled(nac, tmp_path / "x.nac")
    before = {n: (tmp_path / n).read_bytes() for n in ("x.nac", "x.safetensors")}

    class Failing(DeferredValues):        # the last weight fails after the others were written
        def load(self):
            raise OSError("disk full")
    last = list(nac.params.values())[-1]
    last._payload = Failing()
    with pytest.raises(OSError, match="disk full"):
        write_compiled(nac, tmp_path / "x.nac")
    assert sorted(os.listdir(tmp_path)) == ["x.nac", "x.safetensors"]
    assert {n: (tmp_path / n).read_bytes() for n in before} == before


def test_refusals(tmp_path, monkeypatch):
    nac = NacFile()
    a = np.ones(3, np.float32)
    nac.params[1] = Parameter(1, "same", TensorMeta(0, (3,), 0), _payload=a, _file=nac)
    nac.params[2] = Parameter(2, "same", TensorMeta(0, (3,), 0), _payload=a, _file=nac)
    nac.header.weights_internal = False
    with pytest.raises(ValueError, match="unique"):
        write_compiled(nac, tmp_path / "dup.nac")
    nac.params.pop(2)
    nac.params[1].meta = TensorMeta(0, (3,), 2, scale=float("inf"))
    with pytest.raises(ValueError, match="non-finite"):
        write_compiled(nac, tmp_path / "inf.nac")
    nac.params[1].meta = TensorMeta(0, (3,), 0)
    monkeypatch.setattr(safetensors_file, "MAX_HEADER", 10)
    with pytest.raises(ValueError, match="Store these weights internally"):
        write_compiled(nac, tmp_path / "big.nac")
    assert os.listdir(tmp_path) == []
    assert weights_path_for("/a/b/model.v2.nac") == "/a/b/model.v2.safetensors"


def test_quantising_a_file_whose_weights_are_external(corpus_case, tmp_path):
    """The float weights come from the reference's .safetensors; the quantised ones go to ours."""
    nac = read(str(corpus_case("mlp_external")))
    reports = quantize_parameters(nac, "int8_channel")
    assert all(r.max_abs_error > 0 for r in reports)
    want = {p.name: p.array() for p in nac.params.values()}
    write_compiled(nac, tmp_path / "q.nac")
    back = read(str(tmp_path / "q.nac"))
    assert back.header.quant_method == 3 and not back.header.weights_internal
    assert all(np.array_equal(p.array(), want[p.name]) for p in back.params.values())
