"""Static MMAP schedule lint (seed 000 §4, research §9): OPS + MMAP only, no torch.

``check_schedule(nac) -> ScheduleReport(violations, hazards, has_schedule)`` needs no inputs
and no interpreter, so ``nac lint``, the compiler's self-check and the Studio's Problems
list run it without loading torch (``runtime.mmap_check`` adds the dynamic trace, which
does run the file, on top of it). Every :class:`Finding` has ``kind, tick, target, message``.
It reads the file's shared def-use index (:meth:`NacFile.def_use`).

Semantics chosen
----------------
* **Concurrent ticks.** The spec runs tick *i*'s MMAP commands concurrently with instruction *i*.
  So a FREE of *v* on a tick whose instruction reads *v* is a race (**hazard** ``same_tick_free``),
  not a definite violation; a read at a *later* tick is a definite ``use_after_free``. The HEAD
  planner (FREE at the tick of last use) therefore yields only hazards; the v1.6 "look-back"
  planner (FREE at last_use + 1) yields none. The dynamic mode resolves the race in the favourable
  order: the instruction reads first, then the tick's commands take effect.
* **Who needs a route / a FREE.** ``<INPUT>`` values are resident by construction, so they never
  need SAVE_RESULT or FORWARD. Caller-owned placeholders (named ``<INPUT B=0>``, B=2 state,
  B=3 lifted constants) are *not* reported as never freed unless the schedule itself SAVEs them
  (HEAD SAVEs and FREEs user inputs; v1.6 never touches them — both are fine).
  Parameters (``<INPUT B=1>``, plus any other ``<INPUT>`` the schedule PRELOADs — see below)
  must be FREEd once used; so must SAVE_RESULT values and computed values that are neither forwarded nor outputs.
  Output tensors are never freed and need no SAVE (both planners agree) — unless a later
  instruction reads them too: then the spec's rule for results with later consumers applies,
  but the reference HEAD planner gives outputs no command at all, so this is the hazard
  ``output_read_unsaved`` rather than a violation.
* **FORWARD** at tick *k* routes value *k*; its target must be a consumer of *k* and the first one.
  Ticks in between do not matter (v1.6 forwards jump over weight ticks). A value with several
  consumers needs SAVE_RESULT (``multi_consumer_no_save``); a computed value with one consumer
  and neither FORWARD nor SAVE_RESULT has nowhere to go (``unrouted``).
* **PRELOAD** of param *p* at tick *t*, first consumer *u*: ``t < p`` fine; ``p <= t < u`` hazard
  ``preload_after_load`` (the core has already loaded it at its own tick; HEAD does this when params
  precede the first compute tick, §9.3 ``mlp_nolocality``); ``t == u`` hazard ``preload_same_tick``;
  ``t > u`` violation ``preload_after_use``. Params with *no* PRELOAD are fine (loaded at their
  tick; v1.6 silently drops PRELOADs placed on weight ticks). PRELOAD of a computed value is a
  violation; PRELOAD of a non-B=1 ``<INPUT>`` is a hazard ``preload_buffer`` (the spec names only
  B=1, but both planners treat buffers as weights: HEAD emits them as unnamed B=0, v1.6 as B=3
  placeholders, research §9.1/§9.5) and that input is then held to the weight rules.
* An empty MMAP (``optimize=False``) means "no schedule": nothing is checked (``has_schedule``
  False) and the trace keeps every buffer to the end.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import layout as L
from .model import NacFile


@dataclass(frozen=True)
class Finding:
    kind: str
    tick: int
    target: int
    message: str


@dataclass
class ScheduleReport:
    violations: list[Finding] = field(default_factory=list)
    hazards: list[Finding] = field(default_factory=list)
    has_schedule: bool = True

    @property
    def ok(self) -> bool:
        return not self.violations


class _Graph:
    """The def-use index as this check reads it: ``kind`` is a private copy because a
    PRELOADed buffer is re-labelled a weight (see ``preload_buffer``)."""

    def __init__(self, nac: NacFile):
        du = nac.def_use()
        self.n = du.n
        self._du = du
        self.outputs = du.outputs
        self.kind: dict[int, str] = {v: du.kind(v) for v in range(du.n)}

    def users(self, v: int) -> list[int]:
        return list(self._du.users(v))


def commands(nac: NacFile):
    """(tick, action, target) of every MMAP command, in tick order."""
    for rec in sorted(nac.mmap, key=lambda r: r.tick):
        for c in rec.commands:
            yield rec.tick, c.action, c.target


def check_schedule(nac: NacFile) -> ScheduleReport:
    """Lint the MMAP schedule against OPS (no inputs needed). See the module docstring."""
    report = ScheduleReport(has_schedule=bool(nac.mmap))
    if not nac.mmap:
        return report
    g = _Graph(nac)   # the file's shared def-use index, with the kinds this check may re-label
    bad, haz = report.violations, report.hazards
    V = lambda kind, t, v, msg: bad.append(Finding(kind, t, v, msg))   # noqa: E731
    H = lambda kind, t, v, msg: haz.append(Finding(kind, t, v, msg))   # noqa: E731
    saved: set[int] = set()
    forwarded: dict[int, int] = {}
    freed: dict[int, int] = {}
    preloads: dict[int, list[int]] = {}

    for t, action, v in commands(nac):
        name = L.MMAP_ACTION_NAMES.get(action, f"action {action}")
        if t >= g.n:
            V("tick_out_of_range", t, v, f"{name} v{v} on tick {t}: OPS has {g.n} instructions")
            continue
        if v >= g.n:
            V("target_out_of_range", t, v, f"{name} target v{v}: OPS has {g.n} instructions")
            continue
        if action == L.MMAP_SAVE_RESULT:
            if v != t:
                V("save_not_current", t, v, f"SAVE_RESULT v{v} on tick {t}: must name the current instruction")
            else:
                saved.add(v)
        elif action == L.MMAP_FREE:
            if v >= t:
                V("free_before_execute", t, v, f"FREE v{v} on tick {t}: v{v} has not been executed yet")
            elif v in freed:
                V("double_free", t, v, f"FREE v{v} on tick {t}: already freed on tick {freed[v]}")
            else:
                freed[v] = t
        elif action == L.MMAP_FORWARD:
            users = g.users(t)
            if v not in users:
                V("forward_not_consumer", t, v, f"FORWARD v{t} -> {v}: v{v} does not read v{t}"
                  f" (consumers: {users})")
            elif v != users[0]:
                V("forward_not_next", t, v, f"FORWARD v{t} -> {v}: the next consumer is {users[0]}")
            else:
                forwarded[t] = v
        elif action == L.MMAP_PRELOAD:
            if g.kind.get(v) == "input":
                # Both planners plan buffers as weights (HEAD: unnamed B=0, v1.6: B=3 placeholders);
                # the spec names only B=1, so flag it, then treat the input as a weight.
                H("preload_buffer", t, v, f"PRELOAD v{v} on tick {t}: v{v} is an <INPUT B="
                  f"{nac.instructions[v].b}>, not B=1 (the reference compiler plans buffers as weights)")
                g.kind[v] = "param"
            if g.kind.get(v) != "param":
                V("preload_not_param", t, v, f"PRELOAD v{v} on tick {t}: v{v} is not an <INPUT B=1> parameter")
            else:
                preloads.setdefault(v, []).append(t)
        else:
            V("unknown_action", t, v, f"{name} (code {action}) on tick {t} is not generated by any planner")

    for v, f in sorted(freed.items()):
        for u in g.users(v):
            if u > f:
                V("use_after_free", u, v, f"instruction {u} reads v{v}, freed on tick {f}")
            elif u == f:
                H("same_tick_free", f, v, f"FREE v{v} runs concurrently with instruction {f}, which reads it")

    for p, ts in sorted(preloads.items()):
        users = g.users(p)
        if not users:
            continue
        t, u = min(ts), users[0]
        if t > u:
            V("preload_after_use", t, p, f"PRELOAD v{p} on tick {t}, after its first use at {u}")
        elif t == u:
            H("preload_same_tick", t, p, f"PRELOAD v{p} runs concurrently with its first use at {u}")
        elif t >= p:
            H("preload_after_load", t, p, f"PRELOAD v{p} on tick {t}: at or after its load tick {p}")

    for v in range(g.n):
        kind, users = g.kind[v], g.users(v)
        if kind == "output":
            continue
        if v in g.outputs:
            readers = [u for u in users if g.kind[u] != "output"]
            if kind == "compute" and readers and v not in saved and v not in forwarded:
                H("output_read_unsaved", v, v, f"output v{v} is also read by {readers} but has no "
                  f"SAVE_RESULT (the reference HEAD planner routes no output)")
            continue
        if kind == "compute" and users:
            if len(users) > 1 and v not in saved:
                V("multi_consumer_no_save", v, v, f"v{v} has {len(users)} consumers {users} but no SAVE_RESULT")
            elif v not in saved and v not in forwarded:
                V("unrouted", v, v, f"v{v} is read by {users} but has neither SAVE_RESULT nor FORWARD")
        needs_free = v in saved or (users and (kind == "param" or (kind == "compute" and v not in forwarded)))
        if needs_free and v not in freed:
            last = users[-1] if users else v
            V("never_freed", last, v, f"v{v} ({kind}) is never freed (last use: {last})")

    key = lambda f: (f.tick, f.kind, f.target)   # noqa: E731
    bad.sort(key=key)
    haz.sort(key=key)
    return report


__all__ = ["Finding", "ScheduleReport", "check_schedule", "commands"]
