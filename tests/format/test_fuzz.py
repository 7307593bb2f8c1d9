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

Past decoding, every mutant also goes through the lazy paths a user reaches later (issue 15 §5):
each parameter's ``array()`` (the lenient file, as the Studio opens it), the tokenizer rebuilt from
RSRC, ``dis``, the static MMAP lint, and on every ``DEEP_EVERY``-th decoded mutant a full
interpreter run and a simulation with the corpus case's feeds. Each may refuse with
``NacFormatError`` (the interpreter also with ``NacRuntimeError``, the simulator with its shape
budget error), never anything else; and a mutant ``verify`` calls clean must not fail any of them
for a format reason. Workers run under a 3 GB address-space limit and a per-mutant time limit.

``NAC_FUZZ_MUTANTS=20000 python -m pytest tests/format/test_fuzz.py -k ci_slice`` runs the bounded
slice CI uses (two processes, well under a minute of CPU each on a quiet machine).

The fixed seeds make every run identical. ``test_fuzz_quick`` (2,000 mutants) runs in the
default suite; ``test_fuzz_full`` (300,000 mutants, two processes) is marked ``slow``::

    python -m pytest -m slow tests/format/test_fuzz.py -s
"""
from __future__ import annotations

import os
import random
import re
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
DEEP_EVERY = 10                 # run + sim on one decoded mutant in ten (they cost ~100x a decode)
CI_MUTANTS = int(os.environ.get("NAC_FUZZ_MUTANTS", "0") or 0)
WORKER_ADDRESS_SPACE = 3 << 30  # a mutant asking for a 100 GB tensor must fail, not swap the machine
MUTANT_SECONDS = 20             # a mutant that takes longer than this is a finding (unbounded work)
SIM_CPU_BUDGET = 16 << 20

_B8 = (0x00, 0xFF, 0x7F, 0x80)
_BOUNDS = {2: (0, 1, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF),
           4: (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF),
           8: (0, 1, 2 ** 63 - 1, 2 ** 63, 2 ** 64 - 2, 2 ** 64 - 1)}
_BULK = {"tensor_data", "array_data"}
_KNOWN_INEXACT = re.compile(r"^(CNST|ORCH/pool)/const\[\d+\]/value$")


# --------------------------------------------------------------------------- mutation
class Seed:
    """A corpus file and the offsets of its structural (non-payload) bytes."""

    def __init__(self, name: str, data: bytes, feeds: tuple = ()):
        self.name = name
        self.data = data
        self.feeds = feeds
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


class _TooSlow(BaseException):
    """Raised by the per-mutant alarm; a BaseException so no `except Exception` swallows it."""


def _lazy_paths(nac, lenient, size: int, feeds, deep: bool, clean: bool) -> None:
    """Issue 15 §5: weights, tokenizer, dis, lint (and with ``deep`` run and sim) on one mutant.
    ``clean``: verify found nothing, so no path may fail for a format reason."""
    from nac_engine.format.mmap_lint import check_schedule
    from nac_engine.text.disasm import iter_disassembly

    def refused(stage: str, e: BaseException, allowed: tuple = ()) -> None:
        if isinstance(e, NacFormatError):
            _check_format_error(e, size)
            assert not clean, f"{stage} of a file verify calls clean failed for a format reason: {e}"
        elif not isinstance(e, allowed):
            raise AssertionError(f"{stage} raised {type(e).__name__}: {str(e)[:300]}") from e
    for p in list(lenient.params.values()):
        try:
            p.array()
        except Exception as e:   # noqa: BLE001 - the oracle judges the type
            refused(f"weights of {p.name!r}", e)
    try:
        from nac_engine.compiler.tokenizer import load_tokenizer
        load_tokenizer(lenient)
    except ImportError:
        pass
    except NacFormatError as e:
        _check_format_error(e, size)         # tokenizer content is not verify's to vouch for
    except Exception as e:   # noqa: BLE001
        raise AssertionError(f"tokenizer raised {type(e).__name__}: {str(e)[:300]}") from e
    try:
        for _ in iter_disassembly(lenient):
            pass
    except Exception as e:   # noqa: BLE001
        refused("dis", e)
    if nac is None:
        return
    try:
        check_schedule(nac)
    except Exception as e:   # noqa: BLE001
        refused("lint", e)
    if not deep:
        return
    from nac_engine.runtime.errors import NacRuntimeError
    from nac_engine.runtime.session import Session
    from nac_engine.sim.api import simulate
    from nac_engine.runtime.shapes import ShapeBudgetError
    try:
        with Session(nac, feeds=list(feeds) or None) as session:
            session.run()
    except Exception as e:   # noqa: BLE001
        refused("run", e, (NacRuntimeError,))
    try:
        simulate(nac, "edge-32x32", feeds=list(feeds) or None, cpu_budget=SIM_CPU_BUDGET)
    except Exception as e:   # noqa: BLE001
        refused("sim", e, (NacRuntimeError, ShapeBudgetError))


def check_mutant(mutant: bytes, feeds: tuple = (), lazy: bool = False, deep: bool = False) -> str:
    """Run the oracle on one input; returns the outcome, raises AssertionError on a violation.
    ``lazy`` adds the lazy paths (weights, tokenizer, dis, lint), ``deep`` run and sim too."""
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
        problems = verify(lenient)
        for p in problems:
            _check_format_error(p, size)
    except AssertionError:
        raise
    except Exception as e:   # noqa: BLE001
        raise AssertionError(f"lenient read/verify raised {type(e).__name__}: {e}") from e
    if lazy:
        _lazy_paths(nac, lenient, size, feeds, deep and nac is not None, clean=not problems)
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


def case_feeds(path: str) -> tuple:
    """The corpus case's positional inputs (feed_0.npy, feed_1.npy ... beside the file)."""
    import numpy as np
    d = os.path.dirname(path)
    names = sorted((f for f in os.listdir(d) if re.fullmatch(r"feed_\d+\.npy", f)),
                   key=lambda f: int(f[5:-4]))
    return tuple(np.load(os.path.join(d, f), allow_pickle=False) for f in names)


def limit_worker() -> None:
    """Process-pool initializer: bound a worker's memory (a hostile size fails, never swaps)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = WORKER_ADDRESS_SPACE if hard == resource.RLIM_INFINITY else min(WORKER_ADDRESS_SPACE, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _alarm(*_):
    raise _TooSlow()


def run_chunk(args) -> dict:
    """Worker: ``count`` mutants from ``seed_value``; returns counters and failures."""
    import signal
    seed_value, count, paths = args[:3]
    lazy = args[3] if len(args) > 3 else False
    seeds = [Seed(os.path.basename(os.path.dirname(p)), open(p, "rb").read(), case_feeds(p) if lazy else ())
             for p in paths]
    rnd = random.Random(seed_value)
    outcomes: Counter = Counter()
    kinds: Counter = Counter()
    failures = []
    old = signal.signal(signal.SIGALRM, _alarm) if lazy else None
    if lazy:     # first-use costs (torch, the simulator's one-time torch._dynamo import) are not a mutant's
        check_mutant(seeds[0].data, seeds[0].feeds, lazy=True, deep=True)
    for i in range(count):
        seed = rnd.choice(seeds)
        mutant, kind = mutate(rnd, seed)
        try:
            if lazy:
                signal.setitimer(signal.ITIMER_REAL, MUTANT_SECONDS)
            try:
                outcome = check_mutant(mutant, seed.feeds, lazy=lazy, deep=lazy and i % DEEP_EVERY == 0)
            finally:
                if lazy:
                    signal.setitimer(signal.ITIMER_REAL, 0)
        except _TooSlow:
            outcome = "FAILED"
            if len(failures) < 20:
                failures.append({"seed": seed_value, "iteration": i, "source": seed.name, "mutation": kind,
                                 "error": f"took more than {MUTANT_SECONDS} s", "mutant": mutant})
        except AssertionError as e:
            outcome = "FAILED"
            if len(failures) < 20:
                failures.append({"seed": seed_value, "iteration": i, "source": seed.name, "mutation": kind,
                                 "error": str(e), "mutant": mutant})
        outcomes[outcome] += 1
        kinds[kind.split("+")[0] + ("+" if "+" in kind else "")] += 1
    if lazy:
        signal.signal(signal.SIGALRM, old)
    return {"outcomes": outcomes, "kinds": kinds, "failures": failures, "count": count}


def _run(total: int, workers: int, record_property, tmp_path, lazy: bool = False) -> dict:
    paths = [str(p) for p in nac_corpus_files()]
    if not paths:
        pytest.skip("corpus not present")
    chunks = max(workers, 1) * 4 if workers > 1 else 1
    per = [total // chunks + (1 if i < total % chunks else 0) for i in range(chunks)]
    jobs = [(SEED + i, n, paths, lazy) for i, n in enumerate(per)]
    t0 = time.perf_counter()
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers, initializer=limit_worker if lazy else None) as pool:
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


def test_fuzz_lazy_paths_quick(record_property, tmp_path):
    """A few hundred mutants through weights, tokenizer, dis, lint, run and sim (in a worker
    process: the address-space limit must not apply to the test runner)."""
    _run(300, 2, record_property, tmp_path, lazy=True)


@pytest.mark.skipif(not CI_MUTANTS, reason="NAC_FUZZ_MUTANTS=N runs the bounded CI slice")
def test_fuzz_ci_slice(record_property, tmp_path):
    """The slice CI runs: N mutants over two processes, decoders and every lazy path."""
    summary = _run(CI_MUTANTS, FULL_WORKERS, record_property, tmp_path, lazy=True)
    assert summary["mutants"] == CI_MUTANTS


@pytest.mark.slow
def test_fuzz_full(record_property, tmp_path):
    summary = _run(FULL_MUTANTS, FULL_WORKERS, record_property, tmp_path, lazy=True)
    assert summary["mutants"] >= 100_000


def test_mutator_is_deterministic(corpus_files):
    seed = Seed("x", corpus_files[0].read_bytes())
    ra, rb = random.Random(7), random.Random(7)
    a = [mutate(ra, seed) for _ in range(20)]
    b = [mutate(rb, seed) for _ in range(20)]
    assert a == b and len({m for m, _ in a}) > 1
