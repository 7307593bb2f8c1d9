"""Every corpus case runs with its feeds and matches expected_output_*.npy (1e-4 of max |expected|)."""
import json
from pathlib import Path

import numpy as np
import pytest

from nac_engine import read
from nac_engine.runtime import MissingInputError, Session, run

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
CASES = sorted(p for p in (CORPUS / "nac").iterdir() if p.is_dir() and list(p.glob("*.nac"))) \
    if (CORPUS / "nac").is_dir() else []
corpus = pytest.mark.skipif(not CASES, reason="../shared/corpus is absent")
REL_TOL = 1e-4


def load_case(case: Path):
    status = json.loads((case / "status.json").read_text())
    feeds = [np.load(case / f["file"]) for f in status.get("feeds", [])]
    expected = [np.load(p) for p in sorted(case.glob("expected_output_*.npy"),
                                          key=lambda p: int(p.stem.rsplit("_", 1)[1]))]
    return next(case.glob("*.nac")), status, feeds, expected


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if want.size else 0.0
    return diff / scale if scale else diff


@corpus
@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_corpus_case_matches_expected(case):
    path, status, feeds, expected = load_case(case)
    assert expected, "every case has an expected output"
    outputs = run(path, feeds=feeds)
    assert len(outputs) == len(expected)
    for i, (got, want) in enumerate(zip(outputs, expected)):
        assert got.shape == want.shape, f"output {i}"
        assert got.dtype == want.dtype, f"output {i}"
        assert rel_error(got, want) <= REL_TOL, f"output {i}: rel error {rel_error(got, want):.3g}"


@corpus
def test_every_case_the_corpus_index_lists_is_run():
    """The parametrised run covers every folder; this pins that INDEX.md's table (the cases added
    later too: consts_mixed, arange_positions, split_getitem, transpose_kw, gelu_tanh_swish,
    conv1d_pool and their __torch2.13 / __v1.6 variants) is exactly what is run."""
    index = (CORPUS / "nac" / "INDEX.md").read_text()
    listed = {ln.split("|")[1].strip() for ln in index.splitlines()
              if ln.startswith("| ") and not ln.startswith("| case") and not ln.startswith("|---")}
    assert listed == {c.name for c in CASES}
    assert {"consts_mixed", "consts_mixed__torch2.13", "consts_mixed__v1.6", "transpose_kw__torch2.13",
            "split_getitem__v1.6", "conv1d_pool__v1.6", "gelu_tanh_swish", "arange_positions__v1.6"} <= listed


@corpus
@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_feeds_go_to_the_instructions_status_names(case):
    path, status, feeds, _ = load_case(case)
    with read(path) as nac:
        session = Session(nac, feeds=feeds)
        assert [s.tick for s in session.slots] == [f["op_index"] for f in status["feeds"]]


def _case(name):
    for c in CASES:
        if c.name == name:
            return c
    pytest.skip(f"corpus case {name} absent")


@corpus
def test_named_inputs_equal_positional_feeds():
    path, status, feeds, expected = load_case(_case("bert_tiny"))
    named = {f["name"]: np.load(path.parent / f["file"]) for f in status["feeds"] if f["kind"] == "user_input"}
    # the two unnamed buffers come positionally; None defers to the named inputs
    mixed = [None if f["kind"] == "user_input" else np.load(path.parent / f["file"]) for f in status["feeds"]]
    out = run(path, inputs=named, feeds=mixed)
    assert rel_error(out[0], expected[0]) <= REL_TOL


@corpus
def test_v16_lifted_placeholder_must_be_fed():
    path, status, feeds, _ = load_case(_case("bert_tiny__v1.6"))
    with pytest.raises(MissingInputError) as err:
        run(path, inputs={"input_ids": feeds[0], "attention_mask": feeds[1]})
    msg = str(err.value)
    assert "instruction 2" in msg and "instruction 6" in msg
    assert "Tensor_torch.Size([])_torch.int32" in msg
    assert [s.tick for s in err.value.missing] == [2, 6]


@corpus
def test_missing_inputs_are_all_named():
    path, *_ = load_case(_case("bert_tiny"))
    with pytest.raises(MissingInputError) as err:
        run(path)
    msg = str(err.value)
    assert "'input_ids'" in msg and "'attention_mask'" in msg and "unnamed" in msg
    assert len(err.value.missing) == 4


@corpus
def test_squeeze_really_squeezes_in_mha_block():
    path, _, feeds, _ = load_case(_case("mha_block__v1.6"))
    with Session(path, feeds=feeds, keep_results=True) as s:
        s.run()
        ins = s.nac.instructions[11]
        assert s.nac.instruction_name(ins) == "nac.view"
        assert [a.value for a in s.nac.arguments(ins)][1:] == [-2]
        assert s.results[11].ndim == s.results[10].ndim - 1


@corpus
def test_session_reruns_and_keeps_params_cached():
    path, _, feeds, expected = load_case(_case("mlp"))
    with Session(path, feeds=feeds, keep_results=True) as s:
        first = s.run()
        cached = dict(s._params)
        second = s.run()
        assert all(cached[k] is s._params[k] for k in cached)
    np.testing.assert_array_equal(first[0], second[0])
    assert s.results and max(s.results) == len(s.nac.instructions) - 1
