"""Peer decoders stay linear in the file (issue 15 §5) — MIND Core IR text and TVMR binaries:
bytes of RAM per file byte (tracemalloc), CPU time of 4x the input against 1x, and what keeps them
quick checked against reading without it (MIND's remembered line shapes against reading every line
token by token, the canonical printer's shortcut against canonicalize, TVMR's one judgement per
distinct record against the plain per-instruction loop)."""
from __future__ import annotations

import os
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings

from nac_engine.errors import NacFormatError
from nac_engine.peers import open_peer
from nac_engine.peers.base import PeerWarning
from nac_engine.peers.mind import decode as decode_mind
from nac_engine.peers.mind import parser as mind_parser
from nac_engine.peers.mind.canonical import canonical_text, canonicalize, print_module
from nac_engine.peers.tvmr import decode as decode_tvmr
from nac_engine.peers.tvmr import isa
from nac_engine.peers.tvmr.asm import assemble
from nac_engine.peers.tvmr.checks import semantic_checks
from benchmarks.bench_hostile_cost import mind_text as bench_mind_text
from tests.decoder_cost import growth, ram_per_file_byte
from tests.corpus_paths import CORPUS
from tests.peers.mind_strategies import valid_modules

# minutes of CPU: the default tier skips them, .ci/run runs them (pytest -m heavy)
pytestmark = pytest.mark.heavy


def mind_text(scale: int) -> bytes:
    """The bench's MIND input (bench_hostile_cost.py mind_1m), about 250 KB per scale."""
    return bench_mind_text("mind_1m", 250_000 * scale)


def tvmr_program(scale: int, pairs: int = 15_000) -> bytes:
    """The bench's TVMR input (tvmr_1m): about 240 KB of instructions per scale."""
    head = (".registers\n    H0: i32[64]\n    H1: i32[24]\n"
            '    C0: ternary[24, 64]  key="w_in"\n.program\n')
    return assemble(head + "    relu H1, H1\n    ternary_matmul H1, C0, H0\n" * (pairs * scale) + "    halt\n")


def mind_const_text(scale: int) -> bytes:
    """The bench's mind_const_1m: ``ConstF32`` lines (literals in remembered shapes), about 250 KB per scale."""
    return bench_mind_text("mind_const_1m", 250_000 * scale)


def mind_attrs_text(scale: int) -> bytes:
    """The bench's mind_attrs_1m: bench_mind.py's module (attribute lists, comments, four spellings in
    turn), about 250 KB per scale."""
    from benchmarks.bench_mind import make_module
    return make_module(4_690 * scale)[0]


def mind_undefined_text(scale: int) -> bytes:
    """The bench's mind_undefined_1m: every line uses a value never defined (a problem per line, most of
    them past the error limit: counted, not built), about 250 KB per scale."""
    return bench_mind_text("mind_undefined_1m", 250_000 * scale)


STEPS = {"read": lambda p: open_peer(p), "verify": lambda p: open_peer(p).verify(),
         "dis": lambda p: open_peer(p).disassemble()}
KINDS = {"mind": (mind_text, ".ir"), "tvmr": (tvmr_program, ".tvmr"), "mind_const": (mind_const_text, ".ir"),
         "mind_attrs": (mind_attrs_text, ".ir"), "mind_undefined": (mind_undefined_text, ".ir")}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("peer_cost")
    out = {}
    for kind, (build, ext) in KINDS.items():
        for scale in (1, 4):
            path = d / f"{kind}{scale}{ext}"
            path.write_bytes(build(scale))
            out[kind, scale] = path
    return out


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_ram_per_file_byte_is_bounded(files, kind, step):
    per_byte = ram_per_file_byte(STEPS[step], files[kind, 4])
    assert per_byte <= 20, f"{kind} {step}: {per_byte:.1f} B per file byte"


@pytest.mark.parametrize("step", sorted(STEPS))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_four_times_the_input_costs_about_four_times(files, kind, step):
    fn = STEPS[step]
    fn(files[kind, 1])
    small, big = growth(fn, files[kind, 1], fn, files[kind, 4], lambda s, b: b <= 6 * s + 0.02)
    assert big <= 6 * small + 0.02, f"{kind} {step}: 1x {small:.3f} s, 4x {big:.3f} s"


# ----------------------------------------------------------------------------- MIND remembered lines
_FIELDS = ("vid", "opcode", "operands", "params", "attrs", "type", "line", "column", "offset", "length", "name",
           "arg_error", "dialect_op", "tokens", "operand_cols")


def _mind_snapshot(data: bytes) -> str:
    f = decode_mind(data)
    instrs = [[getattr(i, k) for k in _FIELDS] for i in f.module.instrs]
    problems = [(p.section, p.offset, p.reason, p.length, p.code, p.rule) for p in f.problems]
    spans = [(s.offset, s.length, s.path, s.type, s.value) for s in f.root.walk()]
    # object reprs (a Call literal) carry addresses: not part of what is compared
    return re.sub(r" at 0x[0-9a-f]+", "", repr((instrs, problems, f.module.dialect, f.module.outputs,
                                                 f.disassemble(), [r[:4] for r in f.parsed.records()], spans)))


def _general_only(data: bytes) -> str:
    """The snapshot with every line read token by token (no shape remembered)."""
    saved = mind_parser.MEMO_MAX
    mind_parser.MEMO_MAX = 0
    try:
        return _mind_snapshot(data)
    finally:
        mind_parser.MEMO_MAX = saved


def _made(instrs) -> int:
    """Instructions made from a remembered line (their tokens are read on first use)."""
    return sum(i._source is not None for i in instrs)


def _renumbered(line: str, by: int) -> str:
    return re.sub(r"%([0-9]+)", lambda m: f"%{int(m.group(1)) + by}", line)


VARIANTS = [
    "%1 = BinOp(Add, %0, %0) : Tensor<f32, [2, 3]>",
    "  %1=BinOp( Add ,%0 ,  %0 )  :  Tensor< f32 , [ 2 ,3 ] >  ",
    "\t%1 = BinOp(Add,\t%0, %0) : Tensor<f32, [2, 3]>\r",
    "%001 = BinOp(Mul, %000, %0) : Tensor<f32, [2, 3]>",
    "%1 = BinOp(Div, %0, %0) : Tensor<f32, [2, 3]>",
    "%1 = BinOp(Pow, %0, %0) : Tensor<f32, [2, 3]>",
    "%1 = BinOp(true, %0, %0) : Tensor<f32, [2, 3]>",
    "%1 = BinOp(Add, %0) : Tensor<f32, [2, 3]>",
    "%1 = BinOp(Add, %0, %0, %0, %0) : Tensor<f32, [2, 3]>",
    "%1 = BinOp(Add) : Tensor<f32, [2, 3]>",
    "%1 = Relu() : Tensor<f32, [2, 3]>",
    "%1 = Relu(%0 %0) : Tensor<f32, [2, 3]>",
    "%1 = Relu(%0, ) : Tensor<f32, [2, 3]>",
    "%1 = BinOp(%0, %0) : Tensor<f32, [2, 3]>",
    "%1 = BinOp(Add, %0, %0,) : Tensor<f32, [2, 3]>",
    "%1 = Relu(%0) : Tensor<f32, [2, 3]>",
    "%1 = Relu(Add, %0) : Tensor<f32, [2, 3]>",
    "%1 = MatMul(%0, %0) : Tensor<f32, [3, 3]>",
    "%1 = Exp(%0) : Tensor<f32, []>",
    "%1 = Exp(%0) : Tensor<f99, [2, 3]>",
    "%1 = Exp(%0) : Tensor<f32, [2, , 3]>",
    "%1 = Exp(%0) : Tensor<f32, [2 3]>",
    "%1 = Exp(%0) : Tensor<f32, [0, 3]>",
    "%1 = Exp(%9) : Tensor<f32, [2, 3]>",
    "%1 = Exp(%0) : Tensor<f32, [" + ", ".join(["1"] * 33) + "]>",
    "%1 = Exp(%0) : Tensor<f32, [12345678901234567890123, 3]>",
    "%123456789012345678901 = Exp(%0) : Tensor<f32, [2, 3]>",
    "%1 = Exp(%1234567890123456789012345678901234567890123) : Tensor<f32, [2, 3]>",
    "%1 = Frobnicate(%0) : Tensor<f32, [2, 3]>",
    "%1 = Exp(%0) : tensor<f32[2, 3]>",
    "%1 = Exp(%0) : Tensor<f32, [2, 3]> # a comment",
    "%1 = Exp(%0) {name: \"b\"} : Tensor<f32, [2, 3]>",
    "%x = Exp(%0) : Tensor<f32, [2, 3]>",
    "%0 = Exp(%0) : Tensor<f32, [2, 3]>",
    "%1 = Sum(%0, [1], true) : Tensor<f32, [2, 1]>",
    "%1 = Exp(%0) : Tensor<f32, [2, 3]> extra",
    "%1 = Exp(%0) : Tensor<f32, [2, 3]",
    "%1 = Exp(%0) : Tensor<f32, [2, 3]>>",
    "%1 = BinOp(Add, %0, %0) : Tensor<f32, [2, 3]>\x00",       # NUL: the byte that marks references in bulk
    "%1 = BinOp(Add, %0\x00, %0) : Tensor<f32, [2, 3]>",
    "\x00%1 = BinOp(Add, %0, %0) : Tensor<f32, [2, 3]>",
    "%1 = BinOp(Add, %0, %\x000) : Tensor<f32, [2, 3]>",
    "%1 = BinOp(Add, %0, %0) : Tensor<f32, [2, 3]>\x01",
    # literals and comments (read by the fast path since the const/attribute lines of issue 15 §5)
    "%1 = ConstF32(1.5) : Tensor<f32, []>",
    "%1 = ConstF32( -2 ) : Tensor<f32, []>  # c",
    "%1 = ConstF32(1 .5) : Tensor<f32, []>",
    "%1 = ConstF32(-inf) : Tensor<f32, []>",
    "%1 = ConstF32(- inf) : Tensor<f32, []>",
    "%1 = ConstF32(nan) : Tensor<f32, []>",
    "%1 = ConstF32(1e400) : Tensor<f32, []>",
    "%1 = ConstF32(true) : Tensor<f32, []>",
    "%1 = ConstF32(1.5, 2.5) : Tensor<f32, []>",
    "%1 = ConstI64(7) : Tensor<i64, []>",
    "%1 = ConstI64(7.0) : Tensor<i64, []>",
    "%1 = ConstI64(" + "9" * 45 + ") : Tensor<i64, []>",
    "%1 = Transpose(%0, [1, 0]) : Tensor<f32, [3, 2]>",
    "%1 = Transpose(%0,[1,0]) : Tensor<f32, [3, 2]> // residual",
    "%1 = Transpose(%0, [1, %0]) : Tensor<f32, [3, 2]>",
    "%1 = Transpose(%0abc, [1, 0]) : Tensor<f32, [3, 2]>",
    "%1 = Transpose([1, 0], %0) : Tensor<f32, [3, 2]>",
    "%1 = Transpose(%0, [1, 0) : Tensor<f32, [3, 2]>",
    "%1 = Transpose(%0, [[[1]], 0]) : Tensor<f32, [3, 2]>",
    "%1 = Transpose(%0, " + "[" * 70 + "]" * 70 + ") : Tensor<f32, [3, 2]>",
    "%1 = Reshape(%0, [3, -1]) : Tensor<f32, [3, 2]>",
    "%1 = Sum(%0, [1], false) : Tensor<f32, [2]>",
    "%1 = Sum(%0, [1], true, 1) : Tensor<f32, [2, 1]>",
    "%1 = BinOp(Add, %0, %0) : Tensor<f32, [2, 3]> # %5 and more",
    "%1 = BinOp(Add, %0, %0) : Tensor<f32, [2, 3]> # \u00e9",
    "%1 = BinOp(Add, %0, %0) : Tensor<f32, [2, 3]> #\x00",
    "%1 = BinOp(Add, %0, %0) : Tensor<f32, [2, 3]> / 2",
    "%1 = BinOp(Add, %0, %0,, %0) : Tensor<f32, [2, 3]>",
    "%1 = BinOp(Add, %0, %9) : Tensor<f32, [2, 3]>  # undefined, column from the bulk reading",
]


@pytest.mark.parametrize("line", VARIANTS)
def test_a_line_made_from_a_remembered_one_reads_as_reading_it_does(line):
    """Each variant, then the same line with other ids (more digits too): the second is made from the
    first where it may be, and everything about both reads as token by token."""
    for tail in ("\noutputs: %1\n", "\noutputs: %1", "\r\noutputs: %1\r\n"):
        for by in (1, 9, 99999):
            data = ('%0 = Input() {name: "a"} : Tensor<f32, [2, 3]>\n' + line + "\n" + _renumbered(line, by)
                    + tail).encode()
            assert _mind_snapshot(data) == _general_only(data)


@pytest.mark.parametrize("instructions", [1, 3, 4, 5, 9, 64, 401])
def test_interleaved_spellings_and_commutative_swaps_print_as_canonicalize_does(instructions):
    """bench_mind.py's module (MatMul, residual Add with its operands out of order and a comment,
    Relu, Transpose with a [1, 0] list): one spelling per line in turn, printed a spelling at a time;
    and a module of dead constants (canonicalize prunes them before copying): dis == canonicalize."""
    from benchmarks.bench_mind import make_module
    f = decode_mind(make_module(instructions)[0])
    assert not f.problems and (instructions < 64 or _made(f.module.instrs) > len(f.module.instrs) // 2)
    assert f.disassemble() == print_module(canonicalize(f.module))
    consts = "".join(f"%{k} = ConstF32({k % 7}.5) : Tensor<f32, []>  # c\n" for k in range(instructions))
    f = decode_mind((consts + f"%{instructions} = BinOp(Add, %0, %{instructions - 1}) : Tensor<f32, []>\n"
                     f"outputs: %{instructions}\n").encode())
    assert not f.problems and _made(f.module.instrs) == max(0, instructions - 7)    # 7 constants read
    assert f.disassemble() == print_module(canonicalize(f.module))
    kept = canonicalize(f.module).instrs            # the two constants the Add reads fold into one
    assert [i.opcode for i in kept] == ["ConstF32"] and len(canonicalize(f.module, prune=False).instrs) == \
        instructions + 1


def test_a_bare_percent_sign_is_not_a_remembered_reference():
    """``%2 = add %0 %1`` then ``%3 = add % %2``: the text around the references is alike once the
    digits are out, but the second line's first ``%`` is no reference: it is read (and refused) as such."""
    data = b"module {\n  %0 = const.i64 7\n  %1 = const.i64 5\n  %2 = add %0 %1\n  %3 = add % %2\n  output %2\n}\n"
    assert _mind_snapshot(data) == _general_only(data)
    assert any("unexpected character" in p.reason for p in decode_mind(data).problems)


def test_operand_columns_read_first_match_reading_the_line():
    """``operand_cols`` asked before ``tokens`` (the verifier does, for each undefined operand) of a line
    made from a remembered one: the same as reading it token by token."""
    body = "".join(f"%{k} = BinOp(Add,  %{k + 500}, %{k - 1}) : Tensor<f32, [2, 3]>  # x %y\n"
                   f"%{k + 1000} = Transpose(%{k},[1, 0]) : Tensor<f32, [3, 2]>\n" for k in range(1, 40))
    data = ('%0 = Input() {name: "a"} : Tensor<f32, [2, 3]>\n' + body + "outputs: %39\n").encode()

    def columns() -> list:
        return [i.operand_cols for i in mind_parser.parse(data).module.instrs]
    made = columns()
    saved = mind_parser.MEMO_MAX
    mind_parser.MEMO_MAX = 0
    try:
        assert made == columns()
    finally:
        mind_parser.MEMO_MAX = saved
    assert _made(mind_parser.parse(data).module.instrs) == 76       # all but the first of each shape
    assert _mind_snapshot(data) == _general_only(data)


def test_control_bytes_elsewhere_leave_the_other_lines_remembered():
    """A comment holding every control byte is read token by token; the instruction lines around it are
    still made from their remembered shape, reading as token by token."""
    body = "".join(f"%{k} = BinOp(Add, %0, %{k - 1}) : Tensor<f32, [2, 3]>\n" for k in range(1, 200))
    controls = "".join(chr(c) for c in range(32) if c != 10) + "\x7f"
    data = ('%0 = Input() {name: "a"} : Tensor<f32, [2, 3]>\n# ' + controls + "\n" + body + "outputs: %199\n").encode()
    assert _mind_snapshot(data) == _general_only(data)
    assert _made(mind_parser.parse(data).module.instrs) == 198


def test_lines_differing_in_spaces_are_one_shape_per_spacing():
    """Each spacing is a shape of its own (21 here), read once; the rest are made from them, and the
    text prints as canonicalize prints it."""
    body = "".join(" " * (k % 7) + f"%{k} = BinOp(Add, %0, %{k - 1})" + " " * (k % 3) + " : Tensor<f32, [2, 3]>\n"
                   for k in range(1, 300))
    data = ('%0 = Input() {name: "a"} : Tensor<f32, [2, 3]>\n' + body + "outputs: %299\n").encode()
    assert _made(mind_parser.parse(data).module.instrs) == 299 - 21
    f = decode_mind(data)
    assert not f.problems and f.disassemble() == print_module(canonicalize(f.module))
    assert _mind_snapshot(data) == _general_only(data)


def _mind_corpus() -> list[bytes]:
    found = sorted((CORPUS / "peers" / "mind").glob("*.ir")) if (CORPUS / "peers" / "mind").is_dir() else []
    return [p.read_bytes() for p in found]


def test_remembered_lines_read_as_reading_them_on_mutants():
    """Seeded byte mutations of the corpus and of the bench's text: every field, token, problem, span and the
    dis text are the same with remembered shapes as with every line read token by token."""
    seeds = _mind_corpus() + [mind_text(1)[:6000]]
    rnd = random.Random(15)
    for _ in range(min(int(os.environ.get("NAC_FUZZ_MUTANTS", "300")), 2000) // 2):
        d = _mutant(rnd, seeds)
        assert _mind_snapshot(d) == _general_only(d)


_MUTATION_ALPHABET = b"%0123456789 ,()[]<>:=-+\t\rAddMulBinOpReluTensorf32i64x\n{}\"#"


def _mutant(rnd: random.Random, seeds: list) -> bytes:
    """One of ``seeds`` with 1–5 bytes replaced, inserted or deleted (from the IR's own characters)."""
    d = bytearray(rnd.choice(seeds))
    for _ in range(rnd.randrange(1, 6)):
        pos = rnd.randrange(len(d) + 1)
        r = rnd.random()
        if r < 0.4 and d:
            d[min(pos, len(d) - 1)] = rnd.choice(_MUTATION_ALPHABET)
        elif r < 0.7:
            d[pos:pos] = bytes([rnd.choice(_MUTATION_ALPHABET)])
        elif d:
            del d[min(pos, len(d) - 1)]
    return bytes(d)


def test_a_made_line_reads_its_tokens_on_first_use():
    f = decode_mind(mind_text(1)[:2000])
    ins = f.module.instrs[3]
    assert ins._tokens is None                    # nothing per token held until asked for
    roles = [role for role, _ in ins.tokens]
    assert roles == ["result", "opcode", "type", "operand[0]", "operand[1]"]
    span = f.span_at(ins.operand_cols[1][2])
    assert span.path.endswith("operand[1]") and span.value == f"%{ins.operands[1]}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_modules(dtypes=("f32", "i64")))
def test_canonical_text_shortcut_equals_canonicalize(mod):
    assert canonical_text(mod) == print_module(canonicalize(mod))
    text = print_module(mod).encode()
    f = decode_mind(text)
    assert f.disassemble() == print_module(canonicalize(f.module))


@pytest.mark.parametrize("body", [
    "%1 = BinOp(Add, %0, %0) : Tensor<f32, [2, 3]>\n%2 = BinOp(Mul, %1, %0) : Tensor<f32, [2, 3]>\noutputs: %2",
    "%1 = BinOp(Sub, %0, %0) : Tensor<f32, [2, 3]>\n%2 = Relu(%0) : Tensor<f32, [2, 3]>\noutputs: %2",
    "%1 = Relu(%0) : Tensor<f32, [2, 3]>\n%2 = %1\noutputs: %2",
    "%2 = Relu(%0) : Tensor<f32, [2, 3]>\noutputs: %2",
    '%1 = Relu(%0) : Tensor<f32, [2, 3]>\n%2 = Input() {name: "b"} : Tensor<f32, [2, 3]>\n'
    "%3 = BinOp(Add, %1, %2) : Tensor<f32, [2, 3]>\noutputs: %3",
    "%1 = ConstF32(1.5) : f32\n%2 = ConstF32(2.0) : f32\n%3 = BinOp(Add, %1, %2) : f32\n"
    "%4 = BinOp(Add, %0, %3) : Tensor<f32, [2, 3]>\noutputs: %4",
])
def test_canonical_text_shortcut_only_where_canonicalize_changes_nothing(body):
    f = decode_mind(('%0 = Input() {name: "a"} : Tensor<f32, [2, 3]>\n' + body + "\n").encode())
    assert not f.problems, f.problems
    assert f.disassemble() == print_module(canonicalize(f.module))


# ----------------------------------------------------------------------------- MIND columns
def _mixed_text(count: int, seed: int) -> bytes:
    """Fast-path lines of several spellings (BinOp Add/Sub/Mul, Relu, Exp, Neg) interleaved with lines
    the general path reads (inputs, a comment, an alias, a commented instruction; with an odd seed also
    BinOp Div, which the verifier reports), some values unused."""
    rnd = random.Random(seed)
    lines = ['%0 = Input() {name: "a"} : Tensor<f32, [2, 3]>', '%1 = Input() {name: "b"} : Tensor<f32, [2, 3]>']
    for k in range(2, count):
        a, b = sorted(rnd.sample(range(k), 2))
        lines.append(rnd.choice([
            f"%{k} = BinOp(Add, %{a}, %{b}) : Tensor<f32, [2, 3]>",
            f"%{k} = BinOp(Sub, %{b}, %{a}) : Tensor<f32, [2, 3]>",
            f"%{k} = BinOp(Mul, %{a}, %{b}) : Tensor<f32, [2, 3]>", f"%{k} = Relu(%{b}) : Tensor<f32, [2, 3]>",
            f"%{k} = Exp(%{k - 1}) : Tensor<f32, [2, 3]>", f"  %{k} = Neg( %{k - 1} ) : Tensor< f32 , [2, 3] >",
            f"%{k} = Relu(%{k - 1}) : Tensor<f32, [2, 3]>  # commented", f"%{k} = %{k - 1}",
            f'%{k} = Input() {{name: "i{k}"}} : Tensor<f32, [2, 3]>']
            + [f"%{k} = BinOp(Div, %{a}, %{b}) : Tensor<f32, [2, 3]>  # not Core v1"] * (seed % 2)))
        if rnd.random() < 0.05:
            lines.append("# a comment line")
    lines.append(f"outputs: %{count - 1}")
    return ("\n".join(lines) + "\n").encode()


def _chain_text(count: int) -> bytes:
    """A canonical module as its own printer writes it (every value used, inputs first)."""
    lines = ['%0 = Input() {name: "a"} : Tensor<f32, [2, 3]>', '%1 = Input() {name: "b"} : Tensor<f32, [2, 3]>']
    for k in range(2, count):
        lines.append([f"%{k} = BinOp(Add, %{k - 2}, %{k - 1}) : Tensor<f32, [2, 3]>", f"%{k} = Relu(%{k - 1}) : "
                      "Tensor<f32, [2, 3]>", f"%{k} = BinOp(Sub, %{k - 1}, %{k - 2}) : Tensor<f32, [2, 3]>"][k % 3])
    lines.append(f"outputs: %{count - 1}, %{count - 2}")
    return ("\n".join(lines) + "\n").encode()


def _mind_mutants(count: int, seed: int) -> list[bytes]:
    seeds = _mind_corpus() + [mind_text(1)[:6000], _mixed_text(150, 1), _mixed_text(90, 2), _mixed_text(120, 4),
                              _chain_text(120)]
    rnd = random.Random(seed)
    return list(seeds) + [_mutant(rnd, seeds) for _ in range(count)]


def _verdict(ver) -> tuple:
    return ([(p.section, p.offset, p.reason, p.length, p.code, p.rule) for p in ver.problems],
            list(ver.types.items()))


def test_made_lines_verify_and_print_as_read_ones():
    """Modules of several spellings, aliases, comments, unused values and the verifier's own problems,
    and their mutants: the same problems, types and dis text whether lines are made from remembered
    shapes or each read token by token; a clean module's text is canonicalize's."""
    made = 0
    for data in _mind_mutants(min(int(os.environ.get("NAC_FUZZ_MUTANTS", "300")), 2000), 21) + [_chain_text(5000)]:
        f = decode_mind(data)
        saved = mind_parser.MEMO_MAX
        mind_parser.MEMO_MAX = 0
        try:
            read = decode_mind(data)
        finally:
            mind_parser.MEMO_MAX = saved
        assert _verdict(f.verified) == _verdict(read.verified)
        assert f.disassemble() == read.disassemble()
        if not f.problems:
            assert f.disassemble() == print_module(canonicalize(f.module))
        made += _made(f.module.instrs)
    assert made > 1000


# ----------------------------------------------------------------------------- TVMR
def _reference_checks(f) -> list:
    """semantic_checks as a plain per-instruction loop (it judges each distinct record once)."""
    out = []
    ins = list(f.instructions)
    declared = {e.ext_id for e in f.extensions}
    if ins and not (ins[-1].ext_id == 0 and ins[-1].opcode == 0x0001):
        out.append(PeerWarning("instructions", ins[-1].offset, "Program does not end with HALT"))
    seen_input = False
    for i in ins:
        op = isa.lookup(i.ext_id, i.opcode)
        where = f"instructions[{i.index}]"
        if op is None:
            out.append(NacFormatError(where, i.offset, f"Opcode {i.opcode:#06x} not found in extension "
                                                       f"{i.ext_id:#06x} ({isa.ext_name(i.ext_id)})"))
            continue
        if i.ext_id and i.ext_id not in declared:
            out.append(PeerWarning(where, i.offset, f"Extension {i.ext_id:#06X} used but not declared in .requires "
                                                    "section"))
        if i.ext_id == 0 and i.opcode == 0x1007:
            seen_input = True
        elif (i.ext_id == 0 and 0x3000 <= i.opcode < 0x5000) or i.ext_id in isa.COMPUTE_EXTENSIONS:
            if not seen_input:
                out.append(PeerWarning(where, i.offset, "Compute instruction before load_input"))
                seen_input = True
        if op.pattern == "RegRegReg" and i.operands[3]:
            out.append(PeerWarning(where, i.offset + 7, "RegRegReg pattern has non-zero byte 3"))
        if i.ext_id == 0 and i.opcode in (0x6006, 0x6008, 0x6009, 0x600A):
            tgt = int.from_bytes(i.operands[2:4], "big")
            if tgt >= len(ins):
                out.append(NacFormatError(where, i.offset + 6, f"JUMP target {tgt} out of bounds "
                                                               f"({len(ins)} instructions)"))
        if (i.ext_id, i.opcode) in ((0, 0x4000), (2, 0x0000)):
            w, x = f.register(i.operands[1]), f.register(i.operands[2])
            if w and x and len(w.dims) == 2 and x.dims and w.dims[1] != x.dims[0]:
                out.append(PeerWarning(where, i.offset, f"Shape mismatch in TERNARY_MATMUL: weights {w.dims} @ "
                                                        f"input {x.dims} — inner dims {w.dims[1]} != {x.dims[0]}"))
    keys: dict = {}
    for r in f.registers:
        if r.key and r.key in keys:
            out.append(PeerWarning(f"registers/{r.name}", r.offset, f"Duplicate thermogram key "
                                                                    f"{r.key_text!r} (also {isa.reg_name(keys[r.key])})"))
        keys.setdefault(r.key, r.reg)
    return out


def _problems(ps) -> list:
    return [(type(p).__name__, p.section, p.offset, p.reason) for p in ps]


def test_tvmr_checks_match_the_plain_loop_on_mutants():
    found = sorted(CORPUS.glob("**/*.tvmr")) if CORPUS.is_dir() else []
    seeds = [p.read_bytes() for p in found] + [tvmr_program(1, 40), assemble(
        ".registers\n    H0: i32[4]\n    C0: ternary[3, 5]\n.program\n    relu H0, H0\n    load_input H0\n"
        "    ternary_matmul H0, C0, H0\n    jump 9\n    halt\n")]
    rnd = random.Random(4)
    flagged = 0
    for _ in range(min(int(os.environ.get("NAC_FUZZ_MUTANTS", "300")), 2000)):
        d = bytearray(rnd.choice(seeds))
        for _ in range(rnd.randrange(1, 6)):
            pos = rnd.randrange(48, len(d)) if len(d) > 48 and rnd.random() < 0.9 else rnd.randrange(len(d))
            d[pos] = rnd.randrange(256)
        f = decode_tvmr(bytes(d))
        got = _problems(semantic_checks(f))
        assert got == _problems(_reference_checks(f))
        flagged += bool(got)
    assert flagged > 50         # the mutants do reach the checks


def test_tvmr_instruction_table_is_a_sequence():
    f = decode_tvmr(tvmr_program(1, 20))
    ins = f.instructions
    n = len(ins)
    assert n > 10 and [i.index for i in ins] == list(range(n))
    assert ins[-1] == ins[n - 1] and ins[2:5] == [ins[2], ins[3], ins[4]]
    assert all(ins[k].raw == f.data[ins[k].offset:ins[k].offset + 8] for k in range(n))
    with pytest.raises(IndexError):
        ins[n]
    ext, opc, operands = ins.columns()
    assert ext.tolist() == [i.ext_id for i in ins] and opc.tolist() == [i.opcode for i in ins]
    assert [bytes(r) for r in operands] == [i.operands for i in ins]
    counts: dict = {}
    for i in ins:
        counts[i.mnemonic] = counts.get(i.mnemonic, 0) + 1
    assert f.op_histogram() == counts and list(f.op_histogram()) == list(counts) and n == 41
