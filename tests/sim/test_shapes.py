"""Shape propagation: the meta-device run gives the shapes and dtypes a real CPU run gives."""
import json

import numpy as np
import pytest

from nac_engine.format import read
from nac_engine.runtime.errors import MissingInputError
from nac_engine.runtime.shapes import InputSpec, TensorInfo, parse_input_spec, program_shapes
from nac_engine.sim.topology import transformer_program
from tests.corpus_paths import CORPUS

CASES = sorted(p for p in (CORPUS / "nac").iterdir() if p.is_dir() and list(p.glob("*.nac"))) \
    if (CORPUS / "nac").is_dir() else []


def _same(a, b):
    assert len(a.instructions) == len(b.instructions)
    for x, y in zip(a.instructions, b.instructions):
        assert (x.tick, x.op, x.kind, x.reads) == (y.tick, y.op, y.kind, y.reads)
        assert x.outputs[:1] == y.outputs[:1] and len(x.outputs) == len(y.outputs), f"v{x.tick} {x.op}"
        for a, b in zip(x.outputs[1:], y.outputs[1:]):
            # batch norm's saved statistics: the meta kernel gives them shape [C], the CPU [0]
            assert a == b or 0 in (a.numel, b.numel), f"v{x.tick} {x.op}"
        assert [k for k, _ in x.args] == [k for k, _ in y.args]
        assert [v for k, v in x.args if k in ("t", "tl")] == [v for k, v in y.args if k in ("t", "tl")]
        assert x.stored == y.stored


@pytest.mark.skipif(not CASES, reason="../shared/corpus is absent")
@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_meta_shapes_equal_cpu_shapes_on_the_corpus(case):
    st = json.loads((case / "status.json").read_text())
    feeds = [np.load(case / f["file"]) for f in st.get("feeds", [])]
    with read(str(next(case.glob("*.nac")))) as nac:
        meta = program_shapes(nac, feeds=feeds)
        cpu = program_shapes(nac, feeds=feeds, device="cpu")
    assert meta.shape_source == "meta" and cpu.shape_source == "cpu"
    _same(meta, cpu)
    # the output's shape is the expected output's
    expected = np.load(case / "expected_output_0.npy")
    out = meta.instructions[meta.outputs[0]].outputs[0]
    assert out.shape == expected.shape


def test_shapes_of_a_built_transformer():
    nac, inputs = transformer_program(1, 32, 2, 8, vocab=50, with_data=True, schedule=None)
    meta = program_shapes(nac, inputs=inputs)
    real = {k: np.zeros(v.shape, dtype=v.dtype) for k, v in inputs.items()}
    _same(meta, program_shapes(nac, inputs=real, device="cpu"))
    logits = meta.instructions[meta.outputs[0]]
    assert logits.outputs == (TensorInfo((1, 8, 50), "float32"),)
    scores = [x for x in meta.instructions if x.op == "aten.matmul.default"][0]
    assert scores.outputs[0].shape == (1, 2, 8, 8)
    wte = meta.instructions[3]
    assert wte.kind == "param" and wte.stored == TensorInfo((50, 32), "float32")


def test_an_op_without_a_meta_kernel_is_computed_on_the_cpu():
    from nac_engine.sim.topology import _Builder
    b = _Builder(with_data=False)
    x = b.input("x")
    n = b.op("aten.nonzero.default", (x,))          # data-dependent shape: no meta kernel
    nac = b.output(n)
    prog = program_shapes(nac, inputs={"x": np.array([0.0, 1.0, 2.0, 0.0, 3.0], dtype=np.float32)})
    assert prog.shape_source == "mixed" and prog.cpu_ticks == [x, n]
    assert "tick 1 (aten.nonzero.default) has no meta result" in prog.notes[0]
    assert prog.instructions[1].outputs == (TensorInfo((3, 1), "int64"),)


def test_missing_inputs_are_reported_not_guessed():
    nac, _ = transformer_program(1, 32, 2, 8, schedule=None)
    with pytest.raises(MissingInputError):
        program_shapes(nac, inputs={"input_ids": "1x8:int64"})


def test_input_specs():
    assert parse_input_spec("1x128:int64") == InputSpec((1, 128), "int64")
    assert parse_input_spec("2,3") == InputSpec((2, 3), "float32")
    assert parse_input_spec("scalar:int64") == InputSpec((), "int64")
    for bad in ("1x:int64", "abc", "1x2:notatype", "1x99999999999999:int8"):
        with pytest.raises(ValueError):
            parse_input_spec(bad)


def test_memoised_meta_results_equal_fresh_ones(monkeypatch):
    from nac_engine.runtime import _shape_session
    nac, inputs = transformer_program(3, 32, 2, 8, vocab=50, schedule=None)
    _shape_session._META_MEMO.clear()
    cold = program_shapes(nac, inputs=inputs)
    assert len(_shape_session._META_MEMO) < sum(x.kind == "op" for x in cold.instructions)   # layers repeat
    warm = program_shapes(nac, inputs=inputs)
    monkeypatch.setattr(_shape_session, "_memo_key", lambda name, args: None)
    fresh = program_shapes(nac, inputs=inputs)
    _same(cold, fresh)
    _same(warm, fresh)
    assert _shape_session._META_MEMO                       # unchanged by the unmemoised run
    import torch
    x = torch.empty(2, 3, device="meta")
    monkeypatch.undo()
    assert _shape_session._memo_key("aten.add_.Tensor", [x, x]) is None      # in-place: never memoised
    assert _shape_session._memo_key("aten.add.Tensor", [x, x]) is not None
    t = _shape_session._thaw(_shape_session._freeze(x.t()))
    assert t.shape == (3, 2) and t.stride() == (1, 3) and t is not x


def test_progress_covers_describing_the_results_and_can_stop_there(tmp_path):
    """The shape pass has two halves of like cost on a long program (running it on meta, then
    describing every result); both report progress, so Cancel stops either one promptly."""
    from tests.studio.long_stream import long_stream
    nac = long_stream(1200)
    n = len(nac.instructions)
    seen = []
    program_shapes(nac, feeds=[InputSpec((4, 16), "float32")], progress=lambda d, t: seen.append((d, t)))
    assert {t for _d, t in seen} == {2 * n}
    described = [d for d, _t in seen if d >= n]
    assert described[:2] == [n, n + 256] and max(described) >= 2 * n - 256

    class Stop(Exception):
        pass

    def stop_while_describing(done, total):
        if done >= n + 512:
            raise Stop
    with pytest.raises(Stop):
        program_shapes(nac, feeds=[InputSpec((4, 16), "float32")], progress=stop_while_describing)
