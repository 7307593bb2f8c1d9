"""Hostile MIND text: every input gives a module with problems or the one error type (MindError /
NacFormatError), never another exception, and quickly. The slow run covers >= 100k inputs."""
from __future__ import annotations

import gc
import random
import time

import pytest

from nac_engine.errors import NacFormatError
from nac_engine.peers.mind import decode
from nac_engine.peers.mind.canonical import print_module
from nac_engine.peers.mind.errors import MindError
from tests.corpus_paths import CORPUS

SEEDS = [
    b'%0 = Input() {name: "x"} : Tensor<f32, [2, 3]>\n%1 = Input() {name: "w"} : Tensor<f32, [3, 4]>\n'
    b'%2 = MatMul(%0, %1) : Tensor<f32, [2, 4]>\n%3 = Sum(%2, [1], true) : Tensor<f32, [2, 1]>\n'
    b'%4 = Reshape(%3, [-1]) : Tensor<f32, [2]>\n%5 = ConstTensor([1.0, -2.5]) : Tensor<f32, [2]>\n'
    b'%6 = BinOp(Add, %5, %4) : Tensor<f32, [2]>\n%7 = %6  # alias\n%8 = Slice(%0, [0:2, 1:3:1]) : Tensor<f32, [2, 2]>\n'
    b'%9 = Conv2d(%10, %11, [1, 1], Custom([[0, 1], [1, 0]])) : Tensor<f32, [1, 2, 2, 1]>\noutputs: %7, %8\n',
    b'module {\n  %0 = const.i64 7\n  %1 = const.i64 5\n  %2 = add %0 %1\n  output %2\n}  // next_id = 3\n',
    b'%0 = Input () {name=x} : tensor<f32[2, 4]>\n%1 = Add (%0, %0) : tensor<f32[2, 4]>\noutputs: %1\n',
    b'mic@2\nT0 f32 4 4\nT1 f32 4\na X T0\np W T0\np b T1\nm 0 1\n+ 3 2\nr 4\n+ 5 0\nO 6\n',
]
HOSTILE = [
    b"%0 = ConstTensor(" + b"[" * 100_000 + b")",
    b"%0 = Foo(" + b"(" * 100_000,
    b"%0 = " + b"A" * (1 << 20) + b"() : Tensor<f32, [2]>\noutputs: %0\n",
    b"%" + b"x" * (1 << 20) + b' = Input() {name: "a"} : Tensor<f32, [2]>\noutputs: %0\n',
    b'%0 = Input() {name: "' + b"n" * (1 << 20) + b'"} : Tensor<f32, [2]>\noutputs: %0\n',
    b'%0 = Input() {name: "a"} : Tensor<f32, [99999999999999999999, 99999999999999999999]>\n'
    b'%1 = Sum(%0, [], false) : Tensor<f32, []>\n%2 = Slice(%0, [0, 0], [5, 9999999999999999999], [1, 3]) : '
    b'Tensor<f32, [5, 3333333333333333333]>\noutputs: %1, %2\n',
    b'%0 = Input() {name: "a : Tensor<f32, [2]>\noutputs: %0\n',
    b"%0 = ConstI64(" + b"9" * 100_000 + b")\noutputs: %0\n",
    b"%0 = ConstTensor([1.0, 2.0\n",
    b"%0 = Input() {name: \"a\"} : Tensor<f32, [" + b"1, " * 100 + b"1]>\n",
    b"outputs: " + b"%1, " * 100_000 + b"%1\n",
    b"mic@2\nT0 f32 " + b"9" * 39 + b" 3\na X T0\nr 0\nt 1\nsum 2 0 5 -7\nO 3\n",
    b"mic@2\nT0 f32 " + b"1 " * 40 + b"\n",
    b"\x00\xff\xfe%0 = \n", b"", b"\n" * 1000, b"%", b"%0 =", b"outputs:", b"}", b"module {",
]
TOKENS = [b"%0", b"%1", b"%99", b"=", b"(", b")", b"[", b"]", b"{", b"}", b"<", b">", b",", b":", b"-1", b"0",
          b"1e400", b"nan", b"-inf", b"Tensor", b"f32", b"i64", b"BinOp", b"Add", b"Div", b"Reshape", b"Slice",
          b"Conv2d", b"Same", b"Custom", b"true", b'"', b"#", b"//", b"\n", b"outputs", b"mic@2", b"T0", b"?",
          b"\xff", b"\t", b"99999999999999999999999999999999999999999", b"[[[[[["]


def _corpus_seeds() -> list[bytes]:
    d = CORPUS / "peers" / "mind"
    return [p.read_bytes() for p in sorted(d.glob("*.ir"))] if d.is_dir() else []


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(6)
        pos = rng.randint(0, len(b))
        if op == 0 and b:
            b[min(pos, len(b) - 1)] = rng.randrange(256)
        elif op == 1:
            b[pos:pos] = rng.choice(TOKENS)
        elif op == 2 and b:
            del b[pos:pos + rng.randint(1, 16)]
        elif op == 3 and b:
            end = min(len(b), pos + rng.randint(1, 64))
            b[pos:pos] = b[pos:end] * rng.randint(1, 4)
        elif op == 4:
            b[pos:pos] = str(rng.choice([0, -1, 1 << 31, 1 << 63, 10 ** 30])).encode()
        else:
            b[pos:pos] = b" " * rng.randint(0, 3) + rng.choice(TOKENS)
    return bytes(b)


def check_one(data: bytes) -> float:
    t = time.perf_counter()
    try:
        f = decode(data)
    except MindError:
        return time.perf_counter() - t
    for p in f.problems:
        assert isinstance(p, NacFormatError)
    try:
        f.disassemble()
    except NacFormatError:
        pass
    f.graph()
    f.summary()
    f.format_summary()
    sum(1 for _ in f.root.leaves())
    if not f.problems:
        # a clean module prints and re-reads clean
        again = decode(print_module(f.module).encode())
        assert again.problems == [], (data[:200], again.problems[:3])
    return time.perf_counter() - t


def run_fuzz(n: int, seed: int) -> dict:
    """Every input once; ``worst_s`` is the slowest single input. The span trees' parent links are
    reference cycles, so the harness collects them every few hundred inputs outside the timing:
    otherwise one input's time would include a collection of the previous thousands' garbage."""
    rng = random.Random(seed)
    seeds = SEEDS + _corpus_seeds()
    worst = 0.0
    for data in HOSTILE:
        gc.collect()
        worst = max(worst, check_one(data))
    for i in range(n):
        if i % 500 == 0:
            gc.collect()
        data = mutate(rng, rng.choice(seeds))
        if i % 7 == 0:
            data = mutate(rng, data)
        worst = max(worst, check_one(data))
    return {"n": n + len(HOSTILE), "worst_s": worst}


@pytest.mark.heavy
def test_hostile_and_mutated_text_small_slice():
    stats = run_fuzz(2000, seed=13)
    assert stats["worst_s"] < 10, stats


@pytest.mark.slow
def test_hostile_and_mutated_text_100k():
    t = time.perf_counter()
    stats = run_fuzz(100_000, seed=2026)
    print(f"MIND fuzz: {stats['n']:,} inputs in {time.perf_counter() - t:.1f} s, slowest {stats['worst_s']:.3f} s")
    assert stats["worst_s"] < 10, stats
