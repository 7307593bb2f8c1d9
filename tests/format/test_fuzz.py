"""Mutation fuzzing of the codec with inputs derived from the corpus.

Each mutant is one or more of: bit flips, bytes set to 0x00/0xFF/0x7F/0x80, chunk
deletions, chunk duplications, truncations, u16/u32/u64 fields overwritten with boundary
values. 85% of the mutation points fall in the structural bytes of a file (not inside
tensor/array payloads). For every mutant:

* strict ``read`` returns or raises ``NacFormatError`` (offset inside the file, a reason);
* lenient ``read(strict=False)`` never raises and its problems are ``NacFormatError``s;
  ``verify`` of that lenient file never raises either;
* when the strict read succeeds, ``write`` returns bytes or raises ``NacEncodeError``, and the
  bytes read back strictly. They are also expected to equal the mutant (byte-exact round
  trip); the one known exception, a bool constant stored as a byte other than 0/1, is
  counted and allowed (see test_regressions.py).

The fixed seeds make every run identical. ``test_fuzz_quick`` (2,000 mutants) runs in the
default suite; ``test_fuzz_full`` (300,000 mutants, two processes) is marked ``slow``::

    python -m pytest -m slow tests/format/test_fuzz.py -s
"""
from __future__ import annotations

import os
import random
import re
import struct
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor

import pytest

from nac_engine import NacEncodeError, NacFormatError, read, verify, write
from tests.conftest import nac_corpus_files

SEED = 0x5EED_0AC
QUICK_MUTANTS = 2_000
FULL_MUTANTS = 300_000
FULL_WORKERS = 2
STRUCTURAL_BIAS = 0.85

_B8 = (0x00, 0xFF, 0x7F, 0x80)
_BOUNDS = {2: (0, 1, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF),
           4: (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF),
           8: (0, 1, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 2, 2 ** 64 - 1)}
_BULK = {"tensor_data", "array_data"}
_KNOWN_INEXACT = re.compile(r"^(CNST|ORCH/pool)/const\[\d+\]/value$")


# --------------------------------------------------------------------------- mutation
class Seed:
    """A corpus file and the offsets of its structural (non-payload) bytes."""

    def __init__(self, name: str, data: bytes):
        self.name = name
        self.data = data
        nac = read(data)
        offs = []
        for leaf in nac.spans.leaves():
            bulk = leaf.type in _BULK or (leaf.name == "data" and leaf.length > 64)
            if not bulk:
                offs.extend(range(leaf.offset, leaf.end))
        self.structural = offs


def _pos(rnd: random.Random, seed: Seed, n: int) -> int:
    if n <= 0:
        return 0
    if seed.structural and rnd.random() < STRUCTURAL_BIAS:
        p = rnd.choice(seed.structural)
        if p < n:
            return p
    return rnd.randrange(n)


def mutate(rnd: random.Random, seed: Seed) -> tuple[bytes, str]:
    d = bytearray(seed.data)
    kinds = []
    for _ in range(1 if rnd.random() < 0.7 else rnd.randint(2, 3)):
        n = len(d)
        if n == 0:
            break
        k = rnd.randrange(6)
        if k == 0:
            for _ in range(rnd.randint(1, 4)):
                d[_pos(rnd, seed, n)] ^= 1 << rnd.randrange(8)
            kinds.append("bitflip")
        elif k == 1:
            for _ in range(rnd.randint(1, 3)):
                d[_pos(rnd, seed, n)] = rnd.choice(_B8)
            kinds.append("byteset")
        elif k == 2:
            i = _pos(rnd, seed, n)
            del d[i:i + rnd.choice((1, 2, 3, 4, 8, rnd.randint(1, 64), rnd.randint(1, 512)))]
            kinds.append("delete")
        elif k == 3:
            i = _pos(rnd, seed, n)
            d[i:i] = d[i:i + rnd.choice((1, 2, 4, 8, rnd.randint(1, 64)))]
            kinds.append("duplicate")
        elif k == 4:
            d = d[:_pos(rnd, seed, n)]
            kinds.append("truncate")
        else:
            w = rnd.choice((2, 4, 8))
            if n >= w:
                i = min(_pos(rnd, seed, n), n - w)
                v = rnd.choice(_BOUNDS[w] + (n, n + 1, n - 1, rnd.getrandbits(8 * w)))
                d[i:i + w] = (v % (1 << (8 * w))).to_bytes(w, "little")
                kinds.append(f"u{8 * w}")
    return bytes(d), "+".join(kinds)


# --------------------------------------------------------------------------- oracle
def _check_format_error(err, size: int) -> None:
    assert isinstance(err, NacFormatError), repr(err)
    assert isinstance(err.offset, int) and 0 <= err.offset <= size, f"offset {err.offset} outside [0, {size}]"
    assert err.section and err.reason, repr(err)


def check_mutant(mutant: bytes) -> str:
    """Run the oracle on one input; returns the outcome, raises AssertionError on a violation."""
    size = len(mutant)
    nac = None
    try:
        nac = read(mutant)
    except NacFormatError as e:
        _check_format_error(e, size)
    except Exception as e:   # noqa: BLE001 - any other exception is the finding
        raise AssertionError(f"strict read raised {type(e).__name__}: {e}") from e
    try:
        lenient = read(mutant, strict=False)
        for p in lenient.problems:
            _check_format_error(p, size)
        if nac is None:
            assert lenient.problems, "strict read failed but the lenient read reports no problem"
        for p in verify(lenient):
            _check_format_error(p, size)
    except AssertionError:
        raise
    except Exception as e:   # noqa: BLE001
        raise AssertionError(f"lenient read/verify raised {type(e).__name__}: {e}") from e
    if nac is None:
        return "rejected"
    try:
        out = write(nac)
    except NacEncodeError:
        return "encode_refused"
    except Exception as e:   # noqa: BLE001
        raise AssertionError(f"write of a decoded file raised {type(e).__name__}: {e}") from e
    try:
        read(out)
    except Exception as e:   # noqa: BLE001
        raise AssertionError(f"write(read(x)) does not read back: {type(e).__name__}: {e}") from e
    if out == mutant:
        return "decoded"
    first = next((i for i in range(min(len(out), size)) if out[i] != mutant[i]), min(len(out), size))
    sp = nac.span_at(first)
    assert len(out) == size and sp is not None and _KNOWN_INEXACT.match(sp.path) and sp.type == "u8" \
        and mutant[first] not in (0, 1), f"write(read(x)) != x: first difference at {first} in {sp!r}"
    return "decoded_inexact_bool"


def run_chunk(args) -> dict:
    """Worker: ``count`` mutants from ``seed_value``; returns counters and failures."""
    seed_value, count, paths = args
    seeds = [Seed(os.path.basename(os.path.dirname(p)), open(p, "rb").read()) for p in paths]
    rnd = random.Random(seed_value)
    outcomes: Counter = Counter()
    kinds: Counter = Counter()
    failures = []
    for i in range(count):
        seed = rnd.choice(seeds)
        mutant, kind = mutate(rnd, seed)
        try:
            outcome = check_mutant(mutant)
        except AssertionError as e:
            outcome = "FAILED"
            if len(failures) < 20:
                failures.append({"seed": seed_value, "iteration": i, "source": seed.name, "mutation": kind,
                                 "error": str(e), "mutant": mutant})
        outcomes[outcome] += 1
        kinds[kind.split("+")[0] + ("+" if "+" in kind else "")] += 1
    return {"outcomes": outcomes, "kinds": kinds, "failures": failures, "count": count}


def _run(total: int, workers: int, record_property, tmp_path) -> dict:
    paths = [str(p) for p in nac_corpus_files()]
    if not paths:
        pytest.skip("corpus not present")
    chunks = max(workers, 1) * 4 if workers > 1 else 1
    per = [total // chunks + (1 if i < total % chunks else 0) for i in range(chunks)]
    jobs = [(SEED + i, n, paths) for i, n in enumerate(per)]
    t0 = time.perf_counter()
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(run_chunk, jobs))
    else:
        results = [run_chunk(j) for j in jobs]
    elapsed = time.perf_counter() - t0
    outcomes: Counter = Counter()
    kinds: Counter = Counter()
    failures = []
    for r in results:
        outcomes.update(r["outcomes"])
        kinds.update(r["kinds"])
        failures.extend(r["failures"])
    count = sum(r["count"] for r in results)
    summary = {"mutants": count, "seconds": round(elapsed, 1), **dict(outcomes),
               "mutations": dict(sorted(kinds.items()))}
    print(f"\nfuzz: {count} mutants in {elapsed:.1f}s ({workers} process(es)): "
          + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    print(f"fuzz: mutation kinds {dict(sorted(kinds.items()))}")
    for key, value in summary.items():
        record_property(f"fuzz_{key}", value)
    if failures:
        for j, f in enumerate(failures):
            (tmp_path / f"mutant_{j}.nac").write_bytes(f["mutant"])
        lines = [f"seed={f['seed']} iteration={f['iteration']} from {f['source']} ({f['mutation']}): {f['error']}"
                 f" -> {tmp_path / f'mutant_{j}.nac'}" for j, f in enumerate(failures)]
        pytest.fail(f"{outcomes['FAILED']} of {count} mutants broke the codec's contract:\n" + "\n".join(lines))
    assert count == total
    assert outcomes["decoded"] > 0 and outcomes["rejected"] > 0
    return summary


def test_fuzz_quick(record_property, tmp_path):
    _run(QUICK_MUTANTS, 1, record_property, tmp_path)


@pytest.mark.slow
def test_fuzz_full(record_property, tmp_path):
    summary = _run(FULL_MUTANTS, FULL_WORKERS, record_property, tmp_path)
    assert summary["mutants"] >= 100_000


def test_mutator_is_deterministic(corpus_files):
    seed = Seed("x", corpus_files[0].read_bytes())
    ra, rb = random.Random(7), random.Random(7)
    a = [mutate(ra, seed) for _ in range(20)]
    b = [mutate(rb, seed) for _ in range(20)]
    assert a == b and len({m for m, _ in a}) > 1
