"""MIND's error limit (nac_engine.peers.mind.limit): at most MAX_PROBLEMS problems listed, the first in
file order, then one summary problem; everything under the limit exactly as without one."""
from __future__ import annotations

import random

import pytest

from nac_engine.cli import main as nac_main
from nac_engine.peers.mind import MindError, decode, limit
from nac_engine.peers.mind.limit import LIMIT_RULE, MAX_PROBLEMS

HEAD = '%0 = Input() {name: "a"} : Tensor<f32, [2, 3]>'


def undefined_uses(count: int) -> bytes:
    """``count`` lines each using a value never defined: ``count`` problems."""
    lines = [HEAD] + [f"%{n} = BinOp(Add, %0, %{n + 1_000_000}) : Tensor<f32, [2, 3]>" for n in range(1, count + 1)]
    return ("\n".join(lines) + f"\noutputs: %{count}\n").encode()


def _fields(p: MindError) -> tuple:
    return (p.section, p.offset, p.reason, p.length, p.code, p.rule, p.severity)


def _unlimited(data: bytes, monkeypatch) -> list:
    with monkeypatch.context() as m:
        m.setattr(limit, "MAX_PROBLEMS", 10 ** 9)
        return decode(data).problems


def test_five_thousand_problems_list_the_limit_then_one_summary(monkeypatch):
    data = undefined_uses(5000)
    problems = decode(data).problems
    assert len(problems) == MAX_PROBLEMS + 1
    full = _unlimited(data, monkeypatch)
    assert len(full) == 5000
    assert [_fields(p) for p in problems[:-1]] == [_fields(p) for p in full[:MAX_PROBLEMS]]
    last = problems[-1]
    assert isinstance(last, MindError) and last.rule == LIMIT_RULE
    assert last.reason == f"4000 more problems not listed (limit {MAX_PROBLEMS})"
    first_left_out = full[MAX_PROBLEMS]
    assert (last.section, last.offset) == (first_left_out.section, first_left_out.offset)
    assert str(last) == f"{first_left_out.line}:{first_left_out.column}: {last.reason}"


def test_exactly_the_limit_lists_them_all_without_a_summary():
    problems = decode(undefined_uses(MAX_PROBLEMS)).problems
    assert len(problems) == MAX_PROBLEMS
    assert all(p.rule == "use-before-def" for p in problems)
    one_more = decode(undefined_uses(MAX_PROBLEMS + 1)).problems
    assert len(one_more) == MAX_PROBLEMS + 1 and one_more[-1].reason == f"1 more problem not listed (limit {MAX_PROBLEMS})"


def test_a_file_past_the_limit_still_fails_verify(tmp_path, capsys):
    path = tmp_path / "many.ir"
    path.write_bytes(undefined_uses(3000))
    assert nac_main(["verify", str(path)]) != 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == MAX_PROBLEMS + 1
    assert out[-1].endswith(f"2000 more problems not listed (limit {MAX_PROBLEMS})")
    with pytest.raises(MindError) as raised:
        decode(undefined_uses(3000), strict=True)
    assert _fields(raised.value) == _fields(decode(undefined_uses(3000)).problems[0])


# lines with every kind of problem, in any order: syntax errors, redefinitions, undefined and later-defined
# operands, unknown opcodes, type mismatches, outputs naming missing values (the outputs line anywhere)
def _random_module(rng: random.Random) -> bytes:
    lines = [HEAD]
    for n in range(1, rng.randrange(2, 40)):
        kind = rng.randrange(8)
        v = rng.choice([n, n, n, rng.randrange(1, n + 1)])          # sometimes defined again
        if kind == 0:
            lines.append(f"%{v} = BinOp(Add, %0, %{rng.randrange(0, 3 * n + 5)}) : Tensor<f32, [2, 3]>")
        elif kind == 1:
            lines.append(f"%{v} = BinOp(Mul, %{rng.randrange(0, 2 * n)}, %{rng.randrange(0, 2 * n)}) "
                         f": Tensor<f32, [2, 3]>")
        elif kind == 2:
            lines.append(f"%{v} = Frobnicate(%0) : Tensor<f32, [2, 3]>")
        elif kind == 3:
            lines.append(rng.choice(["%%% garbage", "= nothing", "%5 = BinOp(Add, %0", '"unterminated']))
        elif kind == 4:
            lines.append(f"%{v} = Relu(%{rng.randrange(0, 2 * n)}) : Tensor<f32, [3, 2]>")
        elif kind == 5:
            lines.append(f"# comment {n}")
        else:
            lines.append(f"%{v} = BinOp(Add, %0, %0) : Tensor<f32, [2, 3]>")
    outputs = "outputs: " + ", ".join(f"%{rng.randrange(0, 60)}" for _ in range(rng.randrange(0, 6)))
    if rng.random() < 0.8:
        lines.insert(rng.randrange(0, len(lines) + 1), outputs)
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("seed", range(6))
def test_a_small_limit_keeps_the_first_in_file_order_and_counts_the_rest(seed, monkeypatch):
    """Against the same files decoded without a limit: under it every problem (same fields, same order)
    and the same dis text; past it the first ``limit`` of the full list, then a summary that counts the
    rest and stands where the first of them does."""
    rng = random.Random(seed)
    past = under = 0
    for _ in range(60):
        data = _random_module(rng)
        full = _unlimited(data, monkeypatch)
        with monkeypatch.context() as m:
            m.setattr(limit, "MAX_PROBLEMS", 10 ** 9)
            dis_full = decode(data).disassemble()
        cap = rng.randrange(1, 12)
        with monkeypatch.context() as m:
            m.setattr(limit, "MAX_PROBLEMS", cap)
            f = decode(data)
            got = f.problems
            assert f.disassemble() == dis_full
            assert bool(f.verify()) == bool(full)
        if len(full) <= cap:
            under += 1
            assert [_fields(p) for p in got] == [_fields(p) for p in full]
            continue
        past += 1
        assert len(got) == cap + 1
        assert [_fields(p) for p in got[:cap]] == [_fields(p) for p in full[:cap]]
        summary = got[-1]
        assert summary.reason == (f"{len(full) - cap} more problem{'s' if len(full) - cap > 1 else ''} "
                                  f"not listed (limit {cap})")
        assert summary.section == full[cap].section and summary.offset == full[cap].offset
    assert past and under, (past, under)


def test_mic2_syntax_errors_are_limited_too(monkeypatch):
    body = "mic@2\n" + "".join(f"bogus line {k}\n" for k in range(30))
    full = _unlimited(body.encode(), monkeypatch)
    with monkeypatch.context() as m:
        m.setattr(limit, "MAX_PROBLEMS", 5)
        got = decode(body.encode()).problems
    assert len(full) >= 30 and len(got) == 6
    assert [_fields(p) for p in got[:5]] == [_fields(p) for p in full[:5]]
    assert got[-1].reason == f"{len(full) - 5} more problems not listed (limit 5)"
