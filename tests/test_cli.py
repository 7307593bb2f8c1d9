"""The `nac` command as a user runs it: exit codes, one-line errors, files it writes."""
import json
import subprocess
import sys

import pytest

from nac_engine.cli import main
from tests.corpus_paths import NAC_FILES
from tests.cli_fork import run_cli

corpus = pytest.mark.skipif(not NAC_FILES, reason="../shared/corpus is absent")


def run(capsys, *argv):
    code = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return code, out, err


@corpus
def test_info_json(capsys):
    path = next(p for p in NAC_FILES if p.parent.name == "bert_tiny")
    code, out, _ = run(capsys, "info", path, "--json")
    s = json.loads(out)
    assert code == 0 and s["version"] == "1.8" and s["counts"]["instructions"] == 112
    assert [x["tag"] for x in s["sections"]][:2] == ["MMAP", "OPS"]
    assert {i["kind"] for i in s["inputs"]} == {"user", "unnamed"}


@corpus
@pytest.mark.parametrize("path", NAC_FILES, ids=lambda p: p.parent.name)
def test_verify_clean_corpus(capsys, path):
    code, out, _ = run(capsys, "verify", path)
    assert code == 0 and out.strip().endswith("ok")


@corpus
def test_verify_problems_and_unreadable(capsys, tmp_path):
    data = bytearray(NAC_FILES[0].read_bytes())
    bad = tmp_path / "trunc.nac"
    bad.write_bytes(bytes(data[:len(data) // 2]))
    code, out, _ = run(capsys, "verify", bad, "--json")
    report = json.loads(out)
    assert code == 1 and not report["ok"] and report["problems"]
    assert all({"section", "offset", "reason"} <= set(p) for p in report["problems"])
    junk = tmp_path / "junk.nac"
    junk.write_bytes(b"hello world, not a nac file at all" * 4)
    code, _, err = run(capsys, "verify", junk)
    assert code == 2


@corpus
def test_dis_asm_round_trip_via_cli(capsys, tmp_path):
    path = next(p for p in NAC_FILES if p.parent.name == "cnn_bfp8__v1.6")
    text = tmp_path / "m.nas"
    assert run(capsys, "dis", path, "--mmap", "-o", text)[0] == 0
    out = tmp_path / "m.nac"
    code, _, err = run(capsys, "asm", text, "-o", out, "--weights", path)
    assert code == 0, err
    assert out.read_bytes() == path.read_bytes()
    # without --weights: the listing names the data, and the error says where it comes from
    code, _, err = run(capsys, "asm", text, "-o", out)
    assert code == 2 and "the text has only its name; pass the original .nac" in err and "None" not in err
    code, _, err = run(capsys, "asm", text, "-o", out, "--weights", NAC_FILES[0])
    assert code == 2 and f"not found in {NAC_FILES[0]}" in err, err


@corpus
def test_span_names_the_field(capsys):
    path = next(p for p in NAC_FILES if p.parent.name == "mlp")
    code, out, _ = run(capsys, "span", path, "0xc0", "--json")
    info = json.loads(out)
    assert code == 0 and info["leaf"]["path"] == "OPS/count"
    code, out, _ = run(capsys, "span", path, "600")
    assert "DATA/tensors/tensor[0]/data" in out and "fc1.weight" in out


@corpus
def test_rewrite_versions(capsys, tmp_path):
    path = next(p for p in NAC_FILES if p.parent.name == "mlp")
    v16, v18 = tmp_path / "a.nac", tmp_path / "b.nac"
    assert run(capsys, "rewrite", path, "-o", v16, "--version", "1.6")[0] == 0
    assert v16.read_bytes()[3] == 1
    assert run(capsys, "rewrite", v16, "-o", v18, "--version", "1.8")[0] == 0
    assert v18.read_bytes() == path.read_bytes()


def test_errors_are_one_line_without_traceback(tmp_path):
    missing = tmp_path / "nope.nac"
    for argv in (["info", missing], ["span", missing, "1"], ["asm", missing, "-o", tmp_path / "x.nac"],
                 ["rewrite", missing, "-o", tmp_path / "y.nac"]):
        proc = run_cli(argv)
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("nac: error:")


def test_span_offset_outside_file(capsys, tmp_path):
    from tests.resources_path import DEMO
    code, _, err = run(capsys, "span", DEMO, "999999")
    assert code == 2 and "outside the file" in err


def test_bundled_demo_is_clean(capsys):
    from tests.resources_path import DEMO
    code, out, _ = run(capsys, "verify", DEMO)
    assert code == 0


@corpus
def test_run_with_feeds_matches_expected(capsys, tmp_path):
    case = next(p for p in NAC_FILES if p.parent.name == "bert_tiny").parent
    feeds = sorted(case.glob("feed_*.npy"))
    argv = ["run", case / "bert_tiny.nac", "--out", tmp_path, "--compare", case / "expected_output_0.npy",
            "--tolerance", "1e-4", "--check-mmap"]
    for f in feeds:
        argv += ["--feed", f]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "rel 0" in out or "rel " in out
    assert "0 violation(s)" in out
    import numpy as np
    got = np.load(tmp_path / "output_0.npy")
    assert np.allclose(got, np.load(case / "expected_output_0.npy"), rtol=0, atol=1e-4)


@corpus
def test_run_out_writes_each_output_whole(capsys, tmp_path):
    """`--out DIR` writes output_N.npy through the atomic write: a name there that is a FIFO is
    refused with one line (np.save opened it and blocked until something read the pipe)."""
    import os

    import numpy as np
    path = next(p for p in NAC_FILES if p.parent.name == "mlp")
    feed = path.parent / "feed_0.npy"
    code, _, err = run(capsys, "run", path, "--feed", feed, "--out", tmp_path)
    assert code == 0, err
    first = np.load(tmp_path / "output_0.npy")
    os.unlink(tmp_path / "output_0.npy")
    os.mkfifo(tmp_path / "output_0.npy")
    code, _, err = run(capsys, "run", path, "--feed", feed, "--out", tmp_path)
    assert code == 2 and "output_0.npy" in err and "not a regular file" in err
    assert len(err.strip().splitlines()) == 1
    assert [f.name for f in tmp_path.iterdir()] == ["output_0.npy"]      # no temp file left behind
    assert first.shape and np.isfinite(first).all()


@corpus
def test_run_names_missing_inputs_on_one_line(capsys):
    path = next(p for p in NAC_FILES if p.parent.name == "mlp")
    code, _, err = run(capsys, "run", path)
    assert code == 2 and "missing" in err and "'x'" in err
    assert len(err.strip().splitlines()) == 1


@corpus
def test_lint_exit_codes(capsys):
    clean = next(p for p in NAC_FILES if p.parent.name == "mlp")
    dropped_frees = next(p for p in NAC_FILES if p.parent.name == "cnn__v1.6")
    assert run(capsys, "lint", clean)[0] == 0
    code, out, _ = run(capsys, "lint", dropped_frees, "--json")
    report = json.loads(out)
    assert code == 1 and {v["kind"] for v in report["violations"]} == {"never_freed"}


@corpus
def test_run_with_breakpoints_prints_each_stop(capsys):
    case = next(p for p in NAC_FILES if p.parent.name == "bert_tiny").parent
    argv = ["run", case / "bert_tiny.nac", "--break", "op:aten.softmax*", "--break", "tick:5"]
    for f in sorted(case.glob("feed_*.npy")):
        argv += ["--feed", f]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    stops = [ln for ln in out.splitlines() if ln.startswith("break at tick")]
    assert [int(s.split()[3].rstrip(":")) for s in stops] == [5, 46, 88]
    assert "aten.softmax.int float32[1, 2, 8, 8]" in stops[1]
    assert run(capsys, "run", case / "bert_tiny.nac", "--break", "bogus")[0] == 2


@corpus
def test_break_if_accepts_the_vn_names_every_view_shows(capsys):
    """``v46`` names tick 46's value as the disassembly, graph and variables show it; ``t46`` too."""
    case = next(p for p in NAC_FILES if p.parent.name == "bert_tiny").parent
    feeds = [x for f in sorted(case.glob("feed_*.npy")) for x in ("--feed", f)]
    stops = {}
    for name in ("v5", "t5"):
        code, out, err = run(capsys, "run", case / "bert_tiny.nac", "--break", f"if:numel({name}) > 0", *feeds)
        assert code == 0, err
        stops[name] = [ln for ln in out.splitlines() if ln.startswith("break at tick")]
    assert stops["v5"] and stops["v5"] == stops["t5"]
    assert stops["v5"][0].split()[3].rstrip(":") == "5"       # the first tick where v5 exists


def test_an_unknown_input_dtype_lists_the_names_it_takes():
    from nac_engine.runtime.input_spec import parse_input_spec
    with pytest.raises(ValueError) as e:
        parse_input_spec("1x8:float")
    assert "unknown dtype 'float'" in str(e.value) and "float32" in str(e.value) and "int64" in str(e.value)


def test_version_lists_what_a_bug_report_needs_without_importing_torch():
    import subprocess
    import sys
    code = ("import sys; from nac_engine.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "print('torch imported' if 'torch' in sys.modules else 'torch not imported')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = r.stdout.splitlines()
    keys = [ln.split(":", 1)[0] for ln in lines[:-1]]
    assert keys[:3] == ["nac-studio", "Python", "platform"] and "torch" in keys and "numpy" in keys
    assert lines[-1] == "torch not imported"


@pytest.mark.parametrize("argv,words", [
    (["diff", "{mlp}", "nosuch.nac"], "B nosuch.nac: no such file"),
    (["diff", "{tmp}", "{mlp}"], "A {tmp}: not a regular file"),
    (["diff", "{mlp}", "--eager", "nosuch.py:make"], "--eager nosuch.py: no such file"),
    (["run", "{tmp}"], "is a directory"),
])
def test_argument_mistakes_are_said_before_torch_loads(tmp_path, argv, words):
    mlp = str(NAC_FILES[0]) if NAC_FILES else None
    if mlp is None:
        pytest.skip("corpus not present")
    argv = [a.format(mlp=mlp, tmp=tmp_path) for a in argv]
    code = ("import sys, json; from nac_engine.cli import main\n"
            f"rc = main({argv!r})\n"
            "print(json.dumps([rc, 'torch' in sys.modules]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    rc, torch_loaded = json.loads(r.stdout.splitlines()[-1])
    assert rc == 2 and words.format(tmp=tmp_path) in r.stderr and not torch_loaded, (r.stderr, torch_loaded)


def test_info_shows_the_input_shapes_and_a_wrong_shape_is_refused_saying_both(capsys):
    from pathlib import Path
    demo = Path(__file__).resolve().parents[1] / "nac_studio" / "demos" / "demo_cnn.nac"
    assert main(["info", str(demo)]) == 0
    assert "image  float32[1, 3, 16, 16]" in capsys.readouterr().out
    assert main(["info", "--json", str(demo)]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["inputs"]
    assert entry["shape"] == [1, 3, 16, 16] and entry["dtype"] == "float32"
    assert main(["run", str(demo), "--input", "image=1x3x30x30"]) == 2
    err = capsys.readouterr().err
    assert "input 'image' expects 1x3x16x16 float32, got 1x3x30x30 float32" in err and "Traceback" not in err
    # the right shape in another dtype: the kernel's refusal names the input and both dtypes
    assert main(["run", str(demo), "--input", "image=1x3x16x16:float16"]) == 2
    err = capsys.readouterr().err
    assert "(image is float16 where the file was compiled for float32)" in err, err


def test_one_exit_code_rule_for_every_command(monkeypatch, capsys, tmp_path):
    """0 ok, 1 the answer is no, 2 the user's mistake or a refused model, 3 an internal error;
    `nac --help` states it."""
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "exit codes (every command): 0 ok; 1 the answer is no" in " ".join(capsys.readouterr().out.split())
    assert main(["compile", str(tmp_path / "nosuch.py"), "-o", str(tmp_path / "x.nac")]) == 2      # was 1
    assert main(["info", str(tmp_path / "nosuch.nac")]) == 2
    import nac_engine.cli as cli

    def broken(_args):
        raise RuntimeError("a bug of ours")
    monkeypatch.setattr(cli, "cmd_info", broken)
    assert main(["info", str(tmp_path / "nosuch.nac")]) == 3
    assert "internal error: RuntimeError: a bug of ours (please report it" in capsys.readouterr().err


def test_run_takes_tvmr_and_mind_programs(capsys):
    from tests.conftest import CORPUS
    peers = CORPUS / "peers"
    if not peers.is_dir():
        pytest.skip("corpus not present")
    tvmr = sorted((peers / "tvmr" / "synthesized").glob("*.tvmr"))[0]
    assert main(["run", str(tvmr)]) == 0
    out = capsys.readouterr().out
    assert "instructions executed, halted" in out and "output 0: int32[" in out
    ir = peers / "mind" / "simple_module.ir"
    assert main(["run", str(ir)]) == 0
    got = capsys.readouterr()
    assert "converted from mind to NAC in memory" in got.err and "output 0: float32[2, 3]" in got.out
    assert main(["run", str(peers / "neff" / "matmul_small.neff")]) == 2
    assert "a neff file has no converter" in capsys.readouterr().err


@corpus
@pytest.mark.parametrize("command", ["info", "verify", "dis", "lint"])
def test_looking_at_a_big_file_says_how_long_it_took_and_its_peak_memory(capsys, monkeypatch, command):
    """Issue 25 §2: on a multi-GB file info/verify/dis/lint end with a line on stderr (time, peak
    RSS); small files get none (the threshold is lowered here instead of writing 64 MB)."""
    import nac_engine.cli as cli
    path = str(NAC_FILES[0])
    _, _, err = run(capsys, command, path)
    assert "GB of file in" not in err
    monkeypatch.setattr(cli, "COST_LINE_MIN_BYTES", 0)
    _, out, err = run(capsys, command, path)
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"nac {command}: ") and " s, peak RSS " in last and last.endswith(" MB")
    assert "GB of file in" not in out


def test_a_model_file_given_where_a_nac_belongs_gets_the_command_to_run(capsys, tmp_path):
    """A new user's first mistakes: `nac run model.py`, `nac info model.onnx`, `nac dis HF_DIR`.
    Each says what the file is not and which command makes a .nac of it."""
    model = tmp_path / "model.py"
    model.write_text("import torch\n")
    code, _, err = run(capsys, "run", str(model))
    assert code != 0 and "not a NAC file" in err and f"nac compile {model} -o model.nac" in err
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"\x08\x07\x12\x07pytorch" + bytes(64))
    code, _, err = run(capsys, "info", str(onnx))
    assert code != 0 and "not a NAC file" in err and "compile the model first" in err
    tiny = tmp_path / "tiny.onnx"             # shorter than a NAC header: the same advice
    tiny.write_bytes(b"\x08\x07\x12\x07pytorch")
    code, _, err = run(capsys, "info", str(tiny))
    assert code != 0 and "a NAC header needs" in err and "compile the model first" in err
    # a compiled file's external weights, opened instead of the file: open that file
    (tmp_path / "m.nac").write_bytes(b"NAC")
    weights = tmp_path / "m.safetensors"
    weights.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}" + bytes(14))
    code, _, err = run(capsys, "run", str(weights))
    assert code != 0 and f"this is the weights file of m.nac (its external weights): open {tmp_path / 'm.nac'}" in err
    hf = tmp_path / "tiny-llama"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    code, _, err = run(capsys, "dis", str(hf))
    assert code != 0 and f"nac compile --hf {hf} -o model.nac" in err
    junk = tmp_path / "junk.nac"                     # a damaged .nac is not sent to the compiler
    junk.write_bytes(b"XYZ" + bytes(64))
    code, _, err = run(capsys, "info", str(junk))
    assert code != 0 and "not a NAC file" in err and "compile" not in err


def test_an_input_given_as_its_values(capsys, tmp_path):
    """``--input NAME=[...]``: the values themselves (token ids for a file without a tokenizer),
    as the dtype and shape the file records; the run equals the one on the same values from an
    .npy; values that are not a rectangular list of numbers are refused on one line."""
    import numpy as np

    from nac_engine.runtime.input_spec import parse_literal
    from tests.resources_path import DEMO
    bert = DEMO.with_name("demo_bert_tiny.nac")
    ids = [101] + list(range(2000, 2014)) + [102]
    mask = [1] * 16
    out_typed, out_npy = tmp_path / "typed", tmp_path / "npy"
    assert main(["run", str(bert), "--input", f"input_ids={ids}", "--input", f"attention_mask={mask}",
                 "--out", str(out_typed)]) == 0
    np.save(tmp_path / "ids.npy", np.asarray([ids], np.int64))
    np.save(tmp_path / "mask.npy", np.asarray([mask], np.int64))
    assert main(["run", str(bert), "--input", f"input_ids={tmp_path / 'ids.npy'}",
                 "--input", f"attention_mask={tmp_path / 'mask.npy'}", "--out", str(out_npy)]) == 0
    for k in range(2):
        np.testing.assert_array_equal(np.load(out_typed / f"output_{k}.npy"), np.load(out_npy / f"output_{k}.npy"))
    # the ids alone: the mask is what transformers assumes without one (ones), and a note says so
    capsys.readouterr()
    out_ids = tmp_path / "ids_only"
    assert main(["run", str(bert), "--input", f"input_ids={ids}", "--out", str(out_ids)]) == 0
    assert "nac: note: attention_mask not given: set as transformers assumes" in capsys.readouterr().err
    for k in range(2):
        np.testing.assert_array_equal(np.load(out_ids / f"output_{k}.npy"), np.load(out_npy / f"output_{k}.npy"))
    capsys.readouterr()
    code, _, err = run(capsys, "run", bert, "--input", "input_ids=[[1, 2], [3]]")
    assert code == 2 and "--input input_ids: values: the rows are not all the same length" in err
    code, _, err = run(capsys, "run", bert, "--input", "input_ids=[1, 2,")
    assert code == 2 and "not a list of numbers" in err
    assert parse_literal("[true, false]").dtype == bool and parse_literal("[NaN, 1]").dtype == np.float32
    for hostile in ("[" * 100_000 + "]" * 100_000, "[" * 70 + "1" + "]" * 70, "[1]" + " " * (2 << 20)):
        with pytest.raises(ValueError):
            parse_literal(hostile)


def test_a_files_only_input_is_given_without_its_name(capsys, tmp_path):
    """`nac run model.nac --input x.npy` (and a bare shape; `nac sim` alike) for a file with one
    input; with several, the refusal asks which one and lists them."""
    from pathlib import Path
    import numpy as np
    demos = Path(__file__).resolve().parents[1] / "nac_studio" / "demos"
    image = tmp_path / "image.npy"
    np.save(image, np.random.default_rng(0).random((1, 3, 16, 16), dtype=np.float32))
    assert main(["run", str(demos / "demo_cnn.nac"), "--input", str(image)]) == 0
    unnamed = capsys.readouterr().out
    assert main(["run", str(demos / "demo_cnn.nac"), "--input", f"image={image}"]) == 0
    assert capsys.readouterr().out == unnamed
    assert main(["run", str(demos / "demo_cnn.nac"), "--input", "1x3x16x16"]) == 0
    capsys.readouterr()
    assert main(["run", str(demos / "demo_bert_tiny.nac"), "--input", str(image)]) == 2
    err = capsys.readouterr().err
    assert "which input is it? give NAME=" in err and "this file's inputs: input_ids, attention_mask" in err
    assert main(["sim", str(demos / "demo_cnn.nac"), "--input", str(image)]) == 0     # the simulator too
    assert main(["sim", str(demos / "demo_bert_tiny.nac"), "--input", "1x8"]) == 2
    assert "which input is it?" in capsys.readouterr().err


def test_run_without_inputs_says_which_values_it_made(capsys, tmp_path):
    """A run on the file's signature (nobody gave an input) names the inputs it made and the seed,
    so a user reading the outputs knows what they came from; a given input makes no such note."""
    import numpy as np
    from tests.resources_path import DEMO
    demo = DEMO.parent / "demo_bert_tiny.nac"
    code, out, err = run(capsys, "run", demo, "--seed", "3")
    assert code == 0 and out.startswith("output 0 (last_hidden_state)")
    assert err.startswith("nac: note: no input given: input_ids = int64[1, 16], attention_mask = int64[1, 16]")
    assert "(--seed 3)" in err
    ids = tmp_path / "ids.npy"
    np.save(ids, np.ones((1, 16), np.int64))
    code, out, err = run(capsys, "run", demo, "--input", f"input_ids={ids}", "--input", f"attention_mask={ids}")
    assert code == 0 and "no input given" not in err
