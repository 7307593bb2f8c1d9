"""What the MMAP schedule holds after each tick (format/residency.py), against a plain walk of the
commands written here from the rules: SAVE_RESULT and PRELOAD (and 15) put a value in, FREE (and
25) take it out, a FORWARD value is held until its first consumer runs, and only values already
computed are listed. Checked at every tick of a hand-made schedule and of the corpus' files."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from nac_engine.format import layout as L
from nac_engine.format.model import MmapCommand, MmapRecord
from nac_engine.format.reader import read
from nac_engine.format.residency import Residency

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "nac"


def _walk(nac, tick: int) -> dict[int, str]:
    held: dict[int, str] = {}
    for t, action, target in sorted((r.tick, c.action, c.target) for r in nac.mmap for c in r.commands):
        if t > tick:
            break
        if action in (L.MMAP_SAVE_RESULT, L.MMAP_PRELOAD, 15):
            held[target] = "MMAP " + L.MMAP_ACTION_NAMES[action]
        elif action in (L.MMAP_FREE, 25):
            held.pop(target, None)
        elif action == L.MMAP_FORWARD:
            first = nac.def_use().first_use(target)
            if (target if first is None else first) > tick:
                held[target] = "MMAP FORWARD"
    return {k: v for k, v in held.items() if k <= tick}


def _schedule(records: dict[int, list[tuple[int, int]]], first_use: dict[int, int]):
    mmap = [MmapRecord(t, [MmapCommand(a, v) for a, v in cmds]) for t, cmds in records.items()]
    uses = SimpleNamespace(first_use=first_use.get)
    return SimpleNamespace(mmap=mmap, def_use=lambda: uses)


def test_each_rule_at_every_tick():
    nac = _schedule({
        0: [(L.MMAP_SAVE_RESULT, 0), (L.MMAP_PRELOAD, 3)],       # 3 is listed once computed (tick 3)
        1: [(L.MMAP_FORWARD, 1), (15, 2)],                      # 1 until its consumer at tick 4
        2: [(L.MMAP_FREE, 0), (L.MMAP_SAVE_RESULT, 0)],        # one tick's commands apply in action order: saved, then freed
        4: [(L.MMAP_FORWARD, 4), (25, 2)],                      # 4 has no consumer: gone at once
        5: [(L.MMAP_FREE, 3), (L.MMAP_FORWARD, 0)],             # a FORWARD whose consumer ran: no change
        6: [(99, 3)],                                           # an action that holds nothing
    }, {1: 4, 0: 1})
    residency = Residency(nac)
    for tick in range(-1, 9):
        assert residency.at(tick) == _walk(nac, tick), tick
    assert residency.at(1) == {0: "MMAP SAVE_RESULT", 1: "MMAP FORWARD"}
    assert residency.at(3) == {1: "MMAP FORWARD", 2: "MMAP SAVE_FOR_GRAD", 3: "MMAP PRELOAD"}
    assert residency.at(4) == {3: "MMAP PRELOAD"}
    assert residency.at(5) == {}
    assert Residency(_schedule({}, {})).at(10) == {}


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the corpus folder is absent")
def test_the_corpus_schedules_at_every_tick():
    checked = 0
    for path in sorted(CORPUS.glob("*/*.nac")):
        nac = read(str(path), strict=False)
        if not nac.mmap:
            continue
        residency = Residency(nac)
        for tick in range(-1, len(nac.instructions) + 1):
            assert residency.at(tick) == _walk(nac, tick), (path.name, tick)
        checked += 1
    assert checked >= 10
