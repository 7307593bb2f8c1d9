"""`nac asm` on bad input (issue 15 §5): every bad directive is a one-line error naming the
line, never "internal error"; edits its own verify would reject are refused before writing."""
from __future__ import annotations

from pathlib import Path

import pytest

from nac_engine.cli import main

MLP = Path(__file__).resolve().parents[1] / "nac_studio" / "demos" / "demo_mlp.nac"


@pytest.fixture
def text(tmp_path, capsys):
    out = tmp_path / "m.nas"
    assert main(["dis", str(MLP), "--mmap", "-o", str(out)]) == 0
    capsys.readouterr()
    return out.read_text()


def asm(tmp_path, capsys, body, raw: bytes = None):
    src = tmp_path / "edit.nas"
    if raw is not None:
        src.write_bytes(raw)
    else:
        src.write_text(body)
    out = tmp_path / "out.nac"
    code = main(["asm", str(src), "-o", str(out), "--weights", str(MLP)])
    err = capsys.readouterr().err
    return code, err, out


def refused(code, err, out, *words):
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and "internal error" not in err, err
    assert all(w in lines[0] for w in words), err
    assert not out.exists()


def test_round_trip_still_byte_identical(tmp_path, capsys, text):
    code, err, out = asm(tmp_path, capsys, text)
    assert code == 0, err
    assert out.read_bytes() == MLP.read_bytes()


@pytest.mark.parametrize("edit, words", [
    (lambda t: t + "\n.bytecode zz\n", ["line", "not hexadecimal"]),
    (lambda t: t + "\n.mep 0: FLOW_LOOP_END jump=@99999\n", ["line", "jump"]),
    (lambda t: t.replace(".layout MMAP", ".layout MMÄP"), ["line", "MMÄP", "sections are"]),
    (lambda t: t.replace("@0: SAVE_RESULT v0", "@0: SAVE_RESULT v" + "9" * 5000), ["line", "thousands of digits"]),
    (lambda t: t.replace(".tensor 1 float32 [16,8]", ".tensor 1 float32 [" + "9" * 5000 + ",8]"), ["line"]),
    (lambda t: t.replace(".tensor 2 float32 [16]", ".tensor 2 float32 [16]\n.tensor 2 float32 [16]"),
     ["would not read back", "two tensor records", "nothing written"]),
    (lambda t: t.replace("@12: FREE v8", "@40: FREE v1\n@12: FREE v8"),
     ["would not read back", "tick 40", "nothing written"]),
], ids=["bytecode-zz", "mep-jump-range", "layout-non-ascii", "digits-5000", "shape-digits",
        "duplicate-tensor", "mmap-past-end"])
def test_bad_edits_are_one_line_errors(tmp_path, capsys, text, edit, words):
    refused(*asm(tmp_path, capsys, edit(text)), *words)


def test_non_utf8_text(tmp_path, capsys, text):
    refused(*asm(tmp_path, capsys, None, raw=text.encode() + b"\n\xff\xfe bad\n"), "not UTF-8", "byte")


def test_verify_problems_refused_unless_allowed(tmp_path, capsys, text):
    # a constant id no CNST entry holds: decodes, but verify reports it
    bad = text.replace(".orch", ".orch", 1)
    lines = [ln for ln in bad.splitlines() if not ln.startswith("v") or "return" in ln or "input" in ln
             or "param" in ln]
    body = "\n".join(lines)
    code, err, out = asm(tmp_path, capsys, body)
    if code == 0:
        pytest.skip("this edit happens to verify clean")
    assert "does not verify" in err or "would not read back" in err or "line" in err
    assert "internal error" not in err


@pytest.mark.parametrize("body,words", [
    (".version 1.6\n.mmap\n@1: ACTION_x v1\n", ("line 3", "'x' is not a whole number")),
    (".version 1.6\n.proc zz\n", ("line 2", "not hexadecimal")),
    (".version 1.6\n.param 1 w\n.tensor 1 float32 [2] quant=INT8_CHANNEL axis=q\n", ("line 3", "'q' is not a whole number")),
])
def test_errors_speak_the_users_terms_not_pythons(tmp_path, capsys, body, words):
    code, err, out = asm(tmp_path, capsys, body)
    refused(code, err, out, *words)
    assert "int()" not in err and "fromhex" not in err and "base 10" not in err


def test_a_whole_text_error_names_no_line_zero():
    from nac_engine.peers.tvmr.asm import MAX_SOURCE, TvmrAsmError, assemble
    from nac_engine.text.textops import TextError
    with pytest.raises(TvmrAsmError) as e:
        assemble("x" * (MAX_SOURCE + 1))
    assert "line 0" not in str(e.value) and "characters" in str(e.value)
    assert str(TextError(0, "whole text")) == "whole text"
