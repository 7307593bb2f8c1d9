"""MIND Core IR on the real samples: parse, verify, canonicalise idempotently, convert, run equal
to the numpy evaluator; the conformance YAML's expected code; and the CLI on .ir files."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from nac_engine.peers import detect_file, open_peer
from nac_engine.peers.mind import decode
from nac_engine.peers.mind.canonical import canonical_text
from nac_engine.peers.mind.convert import convert_file
from nac_engine.peers.mind.evaluator import evaluate, random_inputs
from nac_engine.peers.mind.parser import parse
from tests.corpus_paths import CORPUS
from tests.cli_fork import run_cli

MIND = CORPUS / "peers" / "mind"
IR_FILES = sorted(MIND.glob("*.ir")) if MIND.is_dir() else []
YAML_FILES = sorted(MIND.glob("*.yaml")) if MIND.is_dir() else []
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus absent")


def test_corpus_has_samples():
    assert len(IR_FILES) >= 4 and YAML_FILES


@pytest.mark.parametrize("path", IR_FILES, ids=lambda p: p.name)
def test_sample_parses_verifies_and_spans_cover_every_byte(path):
    assert detect_file(str(path)) == "mind"
    f = open_peer(str(path))
    assert f.format == "mind" and f.problems == []
    pos = 0
    for leaf in f.root.leaves():
        assert leaf.offset == pos, leaf
        pos = leaf.end
    assert pos == f.size
    ins = f.module.instrs[-1]
    sp = f.span_at(ins.offset)
    assert sp.path.endswith("result") and sp.value == f"%{ins.vid}"


@pytest.mark.parametrize("path", IR_FILES, ids=lambda p: p.name)
def test_sample_canonicalises_idempotently(path):
    f = open_peer(str(path))
    once = canonical_text(f.module)
    assert canonical_text(parse(once.encode(), strict=True).module) == once
    # canonical text evaluates like the original
    x = random_inputs(f.module)
    for a, b in zip(evaluate(f.module, x), evaluate(parse(once.encode()).module, x)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("path", IR_FILES, ids=lambda p: p.name)
def test_sample_converts_and_runs_equal_to_evaluator(path, tmp_path):
    import nac_engine
    from nac_engine.format.source_map import read_source_map
    f = open_peer(str(path))
    res = convert_file(str(path))
    out = tmp_path / "m.nac"
    nac_engine.write(res.nac, str(out))
    x = random_inputs(f.module, seed=3)
    ref = evaluate(f.module, x)
    got = nac_engine.run(str(out), inputs=x)
    assert len(got) == len(ref)
    for r, g in zip(ref, got):
        assert r.shape == g.shape and r.dtype == g.dtype
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    # every tick maps back to an IR line, and the source map in the file says the same
    lines = {i.line for i in f.module.instrs} | {f.module.outputs_line}
    nac = nac_engine.read(str(out))
    assert set(res.tick_lines) == set(range(len(nac.instructions)))
    assert set(res.tick_lines.values()) <= lines
    sm = read_source_map(nac)
    for tick, line in res.tick_lines.items():
        e = sm.entry(tick)
        assert e.line == line and e.file == path.name
        assert e.code == path.read_text().splitlines()[line - 1]


def test_alias_lines_of_the_autodiff_sample():
    f = open_peer(str(MIND / "autodiff_output.ir"))
    aliases = [i for i in f.module.instrs if i.opcode == "Alias"]
    assert [(i.vid, i.operands) for i in aliases] == [(8, [7]), (9, [7])]
    x = random_inputs(f.module)
    loss, gx, gy = evaluate(f.module, x)
    np.testing.assert_allclose(gx, x["y"] + 1, rtol=1e-6)      # the file's own comment: grad_x = y + 1
    np.testing.assert_allclose(gy, x["x"], rtol=1e-6)
    np.testing.assert_allclose(loss, np.sum(x["x"] * x["y"] + x["x"]), rtol=1e-5)


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: p.name)
def test_conformance_yaml_expected_error(path):
    case = yaml.safe_load(path.read_text())
    f = decode(case["input"]["ir_module"].encode())
    expected = case["expected"]
    if expected["status"] == "error":
        codes = [p.code for p in f.problems]
        assert expected["error"]["code"] in codes
        p = next(p for p in f.problems if p.code == expected["error"]["code"])
        assert expected["error"]["message_contains"] in p.reason
        assert (p.line, p.rule) == (3, "reshape-element-count")
    else:
        assert f.problems == []


def _nac(*args):
    return run_cli(args, timeout=120)


def test_cli_info_verify_dis_convert(tmp_path):
    path = MIND / "simple_module.ir"
    r = _nac("info", path, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["format"] == "mind"
    r = _nac("verify", path)
    assert r.returncode == 0 and "ok (mind)" in r.stdout
    r = _nac("dis", path)
    assert r.returncode == 0 and r.stdout == canonical_text(open_peer(str(path)).module)
    bad = tmp_path / "bad.ir"
    bad.write_text('%0 = Input() {name: "x"} : Tensor<f32, [2, 3]>\n%1 = Reshape(%0, [2, 4]) : Tensor<f32, [2, 4]>\n'
                   'outputs: %1, %7\n')
    r = _nac("verify", bad)
    assert r.returncode == 1
    assert "2:1: E4003: Element count mismatch" in r.stdout and "3:14: E4003: output %7 is not defined" in r.stdout
    out = tmp_path / "s.nac"
    r = _nac("convert", path, "-o", out)
    assert r.returncode == 0, r.stderr
    r = _nac("run", out)
    assert r.returncode == 0, r.stderr
    r = _nac("convert", bad, "-o", tmp_path / "b.nac")
    assert r.returncode == 2 and "2:1" in r.stderr and "does not verify" in r.stderr
    assert not (tmp_path / "b.nac").exists()


def test_engine_debugger_on_converted_file_maps_every_tick_to_its_ir_line(tmp_path):
    """Headless: the Debugger steps the converted program; the file's source map names the IR
    line of each tick and each IR value's tick holds what the numpy evaluator computes."""
    import nac_engine
    from nac_engine.format.source_map import read_source_map
    from nac_engine.runtime.debugger import Debugger
    path = MIND / "autodiff_output.ir"
    f = open_peer(str(path))
    res = convert_file(str(path))
    out = tmp_path / "a.nac"
    nac_engine.write(res.nac, str(out))
    sm = read_source_map(nac_engine.read(str(out)))
    x = random_inputs(f.module, seed=5)
    _outs, values = evaluate(f.module, x, keep_all=True)
    dbg = Debugger(str(out), inputs=x)
    by_line = {i.line: i for i in f.module.instrs}
    seen = []
    while dbg.tick < len(res.nac.instructions) - 1:
        dbg.step()
        t = dbg.tick
        line = sm.entry(t).line
        seen.append(line)
        vid = res.tick_values.get(t)
        if vid is not None:
            assert by_line[line].vid == vid
            np.testing.assert_allclose(np.asarray(dbg.result(t).tensor), values[vid], rtol=1e-6)
    assert seen == [16, 17, 20, 23, 26, 34, 39, 40, 53, 54, 58, 65]
