"""NacFile's one def-use index, and the torch-free static schedule check that reads it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nac_engine import read
from nac_engine.format.defuse import DefUse, kind_of
from nac_engine.format.model import Instruction
from nac_engine.isa.optable import OP_INPUT, OP_OUTPUT
from tests.corpus_paths import NAC_FILES

ROOT = Path(__file__).resolve().parents[2]
corpus = pytest.mark.skipif(not NAC_FILES, reason="../shared/corpus is absent")


def _brute_users(instructions):
    users: dict[int, list[int]] = {}
    for ins in instructions:
        for p in sorted(set(ins.producers())):
            users.setdefault(p, []).append(ins.index)
    return users


def _ins(i, a, b=0, d=None):
    return Instruction(i, a, b, (0,), tuple(d) if d else None)


def test_users_kinds_and_last_use_on_a_small_stream():
    # v0 input, v1 param, v2 = op(v0, v1), v3 = op(v2, v2, v0), v4 = output(v3)
    stream = [_ins(0, OP_INPUT, 0), _ins(1, OP_INPUT, 1), _ins(2, 20, 1, [-2, -1]),
              _ins(3, 20, 1, [-1, -1, -3]), _ins(4, OP_OUTPUT, 0, [-1])]
    du = DefUse(stream, [3])
    assert du.users(0) == (2, 3) and du.users(1) == (2,) and du.users(2) == (3,)   # v3 reads v2 twice: one user
    assert du.users(4) == () and du.first_use(0) == 2 and du.last_use(0) == 3 and du.last_use(4) is None
    assert [du.kind(i) for i in range(5)] == ["input", "param", "compute", "compute", "output"]
    assert du.kind(99) is None and du.outputs == frozenset({3})
    assert du.last_uses() == {3: [0, 2], 2: [1], 4: [3]}
    assert kind_of(OP_INPUT, 3) == "input" and kind_of(OP_OUTPUT, 1) == "output"


def test_out_of_range_producers_are_kept_not_raised():
    stream = [_ins(0, OP_INPUT, 0), _ins(1, 20, 1, [5, -9])]   # a damaged file: forward and negative refs
    du = DefUse(stream)
    assert du.users(6) == (1,) and du.users(-8) == (1,)


@corpus
@pytest.mark.parametrize("path", NAC_FILES, ids=lambda p: p.parent.name)
def test_index_matches_a_rebuilt_consumer_map_on_the_corpus(path):
    with read(path) as nac:
        du = nac.def_use()
        brute = _brute_users(nac.instructions)
        assert {v: list(du.users(v)) for v in du.read_values()} == brute
        assert all(nac.users(v) == du.users(v) for v in range(len(nac.instructions)))
        assert du.outputs == frozenset(nac.output_producers())
        assert nac.def_use() is du                      # built once, cached


def test_cache_follows_the_instruction_list():
    stream = [_ins(0, OP_INPUT, 0), _ins(1, OP_OUTPUT, 0, [-1])]
    from nac_engine.format.model import NacFile
    nac = NacFile(instructions=list(stream))
    first = nac.def_use()
    assert nac.users(0) == (1,)
    nac.instructions.append(_ins(2, OP_OUTPUT, 0, [-2]))   # grew: rebuilt
    assert nac.def_use() is not first and nac.users(0) == (1, 2)
    second = nac.def_use()
    nac.instructions = list(stream)                        # replaced: rebuilt
    assert nac.def_use() is not second and nac.users(0) == (1,)
    nac.instructions[1].d = (0,)                           # edited in place: invalidate() says so
    nac.invalidate()
    assert nac.users(0) == ()


def test_mmap_by_tick_is_built_once_and_follows_the_mmap_list():
    """The Properties pane asks at every selection: one shared table, rebuilt when the list is
    replaced or changes length, or after invalidate()."""
    from nac_engine.format.model import MmapCommand, MmapRecord, NacFile
    nac = NacFile(mmap=[MmapRecord(0, [MmapCommand(10, 0)]), MmapRecord(2, [MmapCommand(20, 0)]),
                        MmapRecord(2, [MmapCommand(40, 1)])])
    first = nac.mmap_by_tick()
    assert nac.mmap_by_tick() is first
    assert first == {0: [MmapCommand(10, 0)], 2: [MmapCommand(20, 0), MmapCommand(40, 1)]}
    nac.mmap.append(MmapRecord(3, [MmapCommand(20, 1)]))          # grew: rebuilt
    assert nac.mmap_by_tick() is not first and nac.mmap_by_tick()[3] == [MmapCommand(20, 1)]
    nac.mmap = [MmapRecord(5, [])]                                # replaced: rebuilt
    assert nac.mmap_by_tick() == {5: []}
    nac.mmap[0].commands.append(MmapCommand(10, 4))               # edited in place: invalidate() says so
    nac.invalidate()
    assert nac.mmap_by_tick() == {5: [MmapCommand(10, 4)]}


def _fresh(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


@corpus
def test_nac_lint_does_not_import_torch():
    """`nac lint` in a fresh process: the findings are printed and torch is never imported."""
    path = next(p for p in NAC_FILES if p.parent.name == "bert_tiny__v1.6")
    code = f"""if True:
        import sys
        from nac_engine import cli
        try:
            rc = cli.main(["lint", {str(path)!r}, "--hazards"])
        except SystemExit as e:
            rc = e.code
        print("RC", rc)
        print("TORCH", "torch" in sys.modules)
        """
    out = _fresh(code)
    assert "never_freed" in out.stdout, out.stdout + out.stderr
    assert "RC 1" in out.stdout and "TORCH False" in out.stdout
