"""Differential debugging: `nac diff` and nac_engine.diff against direct per-tick comparisons."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import nac_engine
from nac_engine.cli import main
from nac_engine.isa.optable import OP_INPUT, OP_OUTPUT
from nac_engine.diff import compare_values, diff_eager, diff_files, match_ticks
from nac_engine.runtime.session import Session
from tests.corpus_paths import CORPUS

NAC = CORPUS / "nac"
corpus = pytest.mark.skipif(not (NAC / "mlp").is_dir(), reason="../shared/corpus is absent")
QUANTISED = {"mlp": ["mlp_fp16", "mlp_int8t"],
             "mlp__v1.6": ["mlp_fp16__v1.6", "mlp_int8c__v1.6", "mlp_int8t__v1.6", "mlp_bfp8__v1.6"]}
CASES = [(f, q) for f, qs in QUANTISED.items() for q in qs]


def _cli(capsys, *argv):
    code = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return code, out, err


def _all_results(path, feed) -> dict:
    """Every instruction's value, by running the session one instruction at a time."""
    out = {}
    with Session(str(path), feeds=[feed]) as s:
        s.reset()
        while not s.finished:
            i = s.tick
            s.run_instruction(i)
            if s.results.get(i) is not None:       # <OUTPUT B=0> has no value
                out[i] = s.results[i].detach().numpy().astype(np.float64)
    return out


@corpus
@pytest.mark.parametrize("float_dir, quant_dir", CASES)
def test_first_divergence_of_each_quantised_mlp_agrees_with_a_direct_comparison(capsys, float_dir, quant_dir):
    a = next((NAC / float_dir).glob("*.nac"))
    b = next((NAC / quant_dir).glob("*.nac"))
    feed_path = NAC / float_dir / "feed_0.npy"
    feed = np.load(feed_path)
    code, out, err = _cli(capsys, "diff", a, b, "--inputs", f"x={feed_path}", "--tolerance", "1e-3", "--json")
    res = json.loads(out)
    # direct: the same op ticks of both files (the quantised file has the float file's op sequence)
    ra, rb = _all_results(a, feed), _all_results(b, feed)
    nac = nac_engine.read(str(a))
    ops = [i.index for i in nac.instructions if i.a not in (OP_INPUT, OP_OUTPUT)]
    errors = {t: float(np.abs(ra[t] - rb[t]).max()) for t in ops}
    over = [t for t in ops if errors[t] > 1e-3]
    assert res["method"] == "structure" and [p["tick_a"] for p in res["pairs"]] == ops
    for p in res["pairs"]:
        assert p["tick_b"] == p["tick_a"] and math.isclose(p["max_abs"], errors[p["tick_a"]], rel_tol=1e-9)
    first = res["first_divergence"]
    if over:
        assert code == 1 and first["tick_a"] == over[0], err
    else:
        out_err = float(np.abs(ra[max(ops)] - rb[max(ops)]).max())
        assert out_err <= 1e-3 and code == 0 and first is None


@corpus
def test_text_output_names_the_first_divergence(capsys):
    feed = NAC / "mlp" / "feed_0.npy"
    code, out, _ = _cli(capsys, "diff", NAC / "mlp" / "mlp.nac", NAC / "mlp_int8t" / "mlp_int8t.nac",
                        "--inputs", f"x={feed}")
    assert code == 1 and "first divergence: tick 3" in out and "<-- over tolerance" in out
    code, out, _ = _cli(capsys, "diff", NAC / "mlp" / "mlp.nac", NAC / "mlp" / "mlp.nac", "--inputs", f"x={feed}")
    assert code == 0 and out.strip().endswith("no divergence")


@corpus
def test_files_without_signature_and_without_inputs_ask_in_one_line(capsys):
    code, _, err = _cli(capsys, "diff", NAC / "mlp" / "mlp.nac", NAC / "mlp_fp16" / "mlp_fp16.nac")
    assert code != 0 and len(err.strip().splitlines()) == 1 and "--input NAME=SHAPE:DTYPE" in err


FACTORY = '''
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return torch.softmax(self.fc2(h) * 3.0, -1)


def make_model():
    torch.manual_seed(0)
    return Net(), (torch.randn(4, 6),)
'''


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("diff")
    (d / "model.py").write_text(FACTORY)
    for name, extra in (("f.nac", []), ("q.nac", ["--quant", "int8_tensor"]), ("plain.nac", ["--no-debug-info"])):
        assert main(["compile", str(d / "model.py"), "-o", str(d / name)] + extra) == 0
    return d


def test_source_map_matching_of_a_float_and_a_quantised_compile(compiled):
    res = diff_files(compiled / "f.nac", compiled / "q.nac", tolerance=1e-3)
    assert res.method == "source-map" and res.diverged
    labels = [p.label for p in res.pairs]
    assert labels[0] == "fc1 / linear" and any(lab.endswith("softmax") for lab in labels)
    ra, rb = (_run_all(compiled / n, res) for n in ("f.nac", "q.nac"))
    direct = next(t for t in sorted(ra) if float(np.abs(ra[t] - rb[t]).max()) > 1e-3)
    assert res.first_divergence.tick_a == direct
    # the same two files without a source map on one side: matched by structure, same answer
    res2 = diff_files(compiled / "plain.nac", compiled / "q.nac", tolerance=1e-3)
    assert res2.method == "structure" and res2.first_divergence.tick_a == direct
    assert diff_files(compiled / "f.nac", compiled / "q.nac", tolerance=1.0).first_divergence is None


def _run_all(path, res):
    x = nac_engine.format.input_signature.signature_inputs(nac_engine.read(str(path)))
    out = {}
    with Session(str(path), inputs=x) as s:
        s.reset()
        while not s.finished:
            i = s.tick
            s.run_instruction(i)
            if any(p.tick_a == i for p in res.pairs):
                out[i] = s.results[i].detach().numpy().astype(np.float64)
    return out


def test_eager_diff_matches_every_op_by_node_name(compiled, capsys):
    res = diff_eager(compiled / "f.nac", f"{compiled / 'model.py'}:make_model")
    assert res.method == "source-map" and not res.diverged
    assert {p.label for p in res.pairs} >= {"fc1 / linear", "fc2 / linear_1"}
    assert all(p.max_abs is not None and p.max_abs < 1e-5 for p in res.pairs + res.outputs)
    code, out, _ = _cli(capsys, "diff", compiled / "f.nac", "--eager", f"{compiled / 'model.py'}:make_model")
    assert code == 0 and "no divergence" in out


def test_structure_matching_aligns_an_inserted_instruction(compiled):
    a = nac_engine.read(str(compiled / "plain.nac"))
    method, pairs = match_ticks(a, a)
    assert method == "structure" and pairs == [(i, i, a.instruction_name(ins)) for i, ins in enumerate(a.instructions)]


def test_compare_values():
    assert compare_values(np.array([1.0, np.nan]), np.array([1.0, np.nan]))[:3] == (0.0, 0.0, 1.0)
    m, r, c, _ = compare_values(np.array([1.0, 2.0]), np.array([1.0, np.nan]))
    assert m == math.inf
    m, r, c, _ = compare_values(np.array([2.0, 0.0]), np.array([0.0, 2.0]))
    assert (m, r, c) == (2.0, 1.0, 0.0)
    assert "shapes differ" in compare_values(np.zeros(2), np.zeros(3))[3]
    assert compare_values(np.float32(3), np.float32(3))[0] == 0.0


UNSEEDED = '''
import torch


def make_model():          # no seed of its own: nac compile --seed decides the weights
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(8 * 6 * 6, 10))
    return net, (torch.randn(1, 3, 8, 8),)


def make_bare():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Tanh())
'''


@pytest.mark.parametrize("factory,extra", [("make_model", ["--seed", "7"]), ("make_model", []),
                                           ("make_bare", ["--input", "1x3x8x8"])])
def test_eager_side_is_built_as_compile_built_it(tmp_path, capsys, factory, extra):
    """A factory that does not seed itself: the eager model of nac diff gets the weights nac compile
    gave the file (its seed, recorded in the file), so a correct compile does not diverge; and a
    factory returning a bare module is traced with the file's recorded inputs."""
    (tmp_path / "model.py").write_text(UNSEEDED)
    ref = f"{tmp_path / 'model.py'}:{factory}"
    assert main(["compile", ref, "-o", str(tmp_path / "m.nac")] + extra) == 0
    capsys.readouterr()
    for _ in range(2):          # the same answer every run
        code, out, err = _cli(capsys, "diff", tmp_path / "m.nac", "--eager", ref)
        assert code == 0 and "no divergence" in out, out + err


EMPTY_FACTORY = '''
import torch


class Permute(torch.nn.Module):
    """A mixture-of-experts layer's inverse permutation: an empty buffer, then filled."""
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)

    def forward(self, x):
        perm = torch.argsort(x[:, 0])
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(perm.shape[0])
        return self.fc(x)[inv]


def make_model():
    torch.manual_seed(0)
    return Permute(), (torch.randn(8, 6),)
'''


def test_uninitialised_memory_is_not_compared(tmp_path, capsys):
    """The diff of a float Mixtral and its fp16 compile said its experts' error reached 9.3e18:
    the values of `empty_like`, whatever the allocator handed out. Such a value is listed and not
    compared; what fills it is."""
    (tmp_path / "m.py").write_text(EMPTY_FACTORY)
    for name, extra in (("f.nac", []), ("h.nac", ["--quant", "fp16"])):
        assert main(["compile", str(tmp_path / "m.py"), "-o", str(tmp_path / name)] + extra) == 0
    capsys.readouterr()
    res = diff_files(tmp_path / "f.nac", tmp_path / "h.nac", tolerance=1e-2)
    empty = [p for p in res.pairs if p.op_a == "aten.empty_like.default"]
    assert len(empty) == 1 and empty[0].max_abs is None and not empty[0].diverges
    assert empty[0].note == "uninitialised memory: not compared"
    filled = [p for p in res.pairs if p.tick_a > empty[0].tick_a and p.max_abs is not None]
    assert filled and filled[0].max_abs == 0          # the permutation it holds once filled: equal
    assert not res.diverged


TINY_GPT2 = {"model_type": "gpt2", "vocab_size": 100, "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64,
             "bos_token_id": 0, "eos_token_id": 0}


@pytest.mark.parametrize("extra", [["--seed", "3", "--seq-len", "8"], ["--batch", "2", "--seq-len", "5"],
                                   ["--kv-cache", "decode", "--cache-slots", "16", "--seq-len", "8"]])
def test_a_hugging_face_compile_diffs_against_its_directory(tmp_path, capsys, extra):
    """`nac diff model.nac --eager HF_DIR` builds transformers' model as `nac compile --hf` built
    it (seed, random weights, batch, lengths, the key/value-cache step: recorded in the file), so
    a correct compile does not diverge, and an int8 compile of it does, with the layer named."""
    import json
    from nac_engine.format.build_recipe import build_hf_options
    from nac_engine.format.reader import read
    d = tmp_path / "tiny-gpt2"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(TINY_GPT2))
    assert main(["compile", "--hf", str(d), "-o", str(tmp_path / "f.nac")] + extra) == 0
    with read(str(tmp_path / "f.nac")) as nac:
        options = build_hf_options(nac)
    assert options["class"] == "AutoModel" and options["random_weights"] is False
    assert ("kv_cache" in options) == ("--kv-cache" in extra)
    capsys.readouterr()
    code, out, err = _cli(capsys, "diff", tmp_path / "f.nac", "--eager", d)
    assert code == 0 and "no divergence" in out and "source-map" in out, out + err
    if "--kv-cache" in extra:
        return
    assert main(["compile", "--hf", str(d), "-o", str(tmp_path / "q.nac"), "--quant", "int8_channel"] + extra) == 0
    capsys.readouterr()
    code, out, err = _cli(capsys, "diff", tmp_path / "q.nac", "--eager", d / "config.json")
    assert code == 1 and "first divergence: tick" in out and "h.0." in out.split("first divergence")[1], out + err


def test_a_recorded_hf_option_of_the_wrong_kind_is_a_format_error(tmp_path):
    from nac_engine.errors import NacFormatError
    from nac_engine.format.build_recipe import build_hf_options, set_build_recipe
    from nac_engine.format.model import NacFile
    nac = NacFile()
    nac.rsrc = []
    set_build_recipe(nac, seed=0, hf={"class": "AutoModel", "seq_len": 8, "unknown": 1, "batch": None})
    assert build_hf_options(nac) == {"class": "AutoModel", "seq_len": 8}
    for bad in ({"batch": -1}, {"seq_len": "8"}, {"class": 3}, {"random_weights": 1}, {"eval": "x"}):
        payload = json.dumps({"version": 1, "seed": 0, "hf": bad}).encode()
        from nac_engine.format.model import Resource
        nac.rsrc = [Resource("nac-studio/build", _payload=payload)]
        with pytest.raises(NacFormatError, match="nac-studio/build"):
            build_hf_options(nac)
