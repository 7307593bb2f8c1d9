"""``nac profile FILE``: measured time per instruction on this CPU, the slowest instructions and
ops, and with ``--hw`` the simulated cycles of the same instructions beside them (see
:mod:`nac_engine.runtime.profile`). Outside ``runtime/`` so that building the parser does not
load torch."""
from __future__ import annotations

import json


def add_parser(sub) -> None:
    s = sub.add_parser("profile", help="time every instruction on this CPU (beside simulated cycles with --hw)",
                       description="Run FILE once to warm up, then --repeat times timing each instruction "
                                   "(median per instruction), and list the slowest instructions and ops. With "
                                   "--hw PRESET the simulator's cycles and time for the same instructions are "
                                   "printed beside the measured time.")
    s.add_argument("file")
    s.add_argument("--input", action="append", metavar="NAME=x.npy|NAME=SHAPE[:DTYPE]|NAME=[VALUES]",
                   help="a named user input (default: the file's recorded input signature, seeded random)")
    s.add_argument("--feed", action="append", metavar="x.npy",
                   help="positional value for each <INPUT B=0>/<INPUT B=3> in instruction order")
    s.add_argument("--seed", type=int, default=0, help="seed for generated inputs (default 0)")
    s.add_argument("--repeat", type=int, default=3, metavar="N", help="timed runs, median per instruction (default 3)")
    s.add_argument("--top", type=int, default=15, metavar="K", help="how many of the slowest to list (default 15)")
    s.add_argument("--hw", metavar="PRESET_OR_TOML", help="also simulate on this hardware and print its cycles")
    s.add_argument("--json", action="store_true", help="print every instruction's figures as JSON")
    from .cli_inputs import add_import_argument
    add_import_argument(s)
    s.set_defaults(func=cmd_profile)


def _inputs(args, nac):
    from .cli_inputs import load_npy, named_items, run_inputs
    feeds = [load_npy(p) for p in args.feed] if args.feed else None
    items = named_items(args.input)
    inputs = run_inputs(nac, items, args.seed, default=not items and feeds is None)
    return inputs or None, feeds


def _us(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:,.1f}"


def cmd_profile(args) -> int:
    from .cli_inputs import load_imports
    load_imports(args.imports)
    from .cli_error import CliError
    from .cli_inputs import converted_peer, open_nac, open_peer_file
    from .runtime.errors import NacRuntimeError
    from .format.source_map import module_paths
    from .runtime.profile import profile
    if args.repeat < 1 or args.top < 0:
        raise CliError("--repeat must be at least 1 and --top at least 0")
    peer = open_peer_file(args.file)          # a MIND .ir is converted in memory, as nac run does
    with (converted_peer(args.file, peer.format, "nac profile") if peer is not None else open_nac(args.file)) as nac:
        inputs, feeds = _inputs(args, nac)
        try:
            prof = profile(nac, inputs, feeds, repeat=args.repeat)
        except NacRuntimeError as e:
            raise CliError(f"{args.file}: {e}") from None
        where = module_paths(nac)
        sim = None
        if args.hw:
            from .sim.api import simulate
            try:
                sim = simulate(nac, args.hw, inputs=inputs, feeds=feeds)
            except ValueError as e:          # (HardwareConfigError is one: an unknown preset, a bad TOML)
                raise CliError(f"--hw {args.hw}: {e}") from None
    cycles = sim.cycles_by_tick() if sim else {}
    clock = sim.clock_hz if sim else None
    if args.json:
        rows = [{"tick": t, "op": prof.ops[t], "module": where.get(t, ""),
                 "measured_s": None if prof.seconds[t] != prof.seconds[t] else float(prof.seconds[t]),
                 "cycles": cycles.get(t), "simulated_s": cycles[t] / clock if t in cycles else None}
                for t in range(len(prof.ops))]
        print(json.dumps({"file": args.file, "repeat": prof.repeat, "total_seconds": prof.total_seconds,
                          "hardware": args.hw, "simulated_total_s": sim.time_s if sim else None,
                          "instructions": rows}, indent=2))
        return 0
    measured = float(sum(s for s in prof.seconds.tolist() if s == s))
    print(f"{args.file}: {len(prof.ops)} instructions, median run {prof.total_seconds * 1e3:,.2f} ms "
          f"({prof.repeat} timed runs after one warm-up; instructions sum to {measured * 1e3:,.2f} ms)")
    if sim is not None:
        print(f"simulated on {args.hw}: {sim.total_cycles:,} cycles = {sim.time_s * 1e6:,.1f} µs at "
              f"{clock / 1e6:g} MHz")
    head = f"{'tick':>6}  {'measured µs':>12}  {'share':>6}"
    if sim is not None:
        head += f"  {'cycles':>12}  {'simulated µs':>12}"
    print(f"\nslowest instructions\n{head}  op")
    for t, s in prof.slowest(args.top):
        line = f"{t:>6}  {_us(s):>12}  {s / measured if measured else 0:>6.1%}"
        if sim is not None:
            c = cycles.get(t)
            line += f"  {c:>12,}  {_us(c / clock):>12}" if c is not None else f"  {'-':>12}  {'-':>12}"
        print(f"{line}  {prof.ops[t]}" + (f"  ({where[t]})" if where.get(t) else ""))
    print(f"\nslowest ops (all their instructions)\n{'measured µs':>12}  {'share':>6}  {'count':>5}  op")
    for op, s, n in prof.by_op()[:args.top]:
        print(f"{_us(s):>12}  {s / measured if measured else 0:>6.1%}  {n:>5}  {op}")
    return 0
