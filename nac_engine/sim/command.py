"""``nac sim``: argument parsing and printing for the simulator (the work is in the engine).

Importing this module loads neither torch nor the simulator: ``nac``'s other commands stay fast.
"""
from __future__ import annotations

import json
import os
import sys


def add_parser(sub) -> None:
    s = sub.add_parser("sim", help="cycle-level simulation on a hardware preset or TOML file",
                       description="Simulate FILE on a NAC coprocessor/ASIC model: systolic array, vector/SFU "
                                   "units, SRAM and DMA driven by the MMAP schedule.")
    s.add_argument("file")
    s.add_argument("--hw", default="edge-32x32", metavar="PRESET_OR_TOML",
                   help="hardware preset (nac-core-ref, edge-32x32, server-128x128, scalesim-32x32-os|ws|is) "
                        "or a .toml file (default edge-32x32)")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.add_argument("--trace", metavar="trace.json", help="write a Chrome trace-event file (opens in Perfetto)")
    s.add_argument("--csv", metavar="per_instr.csv", help="write the per-instruction table as CSV")
    s.add_argument("--input", action="append", metavar="NAME=SHAPE[:DTYPE]|NAME=x.npy",
                   help="a named input: its shape (1x128:int64) or an .npy file")
    s.add_argument("--feed", action="append", metavar="SHAPE[:DTYPE]|x.npy",
                   help="positional value for each <INPUT B=0>/<INPUT B=3> in instruction order")
    s.add_argument("--set", action="append", metavar="KEY=VALUE", dest="sets",
                   help="override one hardware key (array.rows=64; a byte count may say sram.bytes=512K)")
    s.add_argument("--sweep", action="append", metavar="KEY=V1,V2,...",
                   help="sweep a hardware key over values (repeat for a grid); prints a table")
    s.add_argument("--workers", type=int, metavar="N", help="processes for --sweep (default: CPU count)")
    s.add_argument("--scheduler", metavar="tcp://HOST:PORT|local:N",
                   help="run --sweep on Dask distributed: an existing scheduler, or local:N to start a "
                        "LocalCluster of N workers (needs dask[distributed]; default: local processes)")
    s.add_argument("--cpu-budget", default="256M", metavar="BYTES",
                   help="bytes shape propagation may compute on the CPU for ops without a meta kernel and "
                        "<CONTROL_FLOW> predicates (4096, 256M, 1G; default 256M); the rest runs on meta")
    from ..cli_inputs import add_import_argument
    add_import_argument(s)
    s.set_defaults(func=cmd_sim)


def _value(text: str, what: str):
    from ..cli_error import CliError
    from ..runtime.shapes import parse_input_spec
    if text.endswith(".npy") or os.path.isfile(text):
        import numpy as np
        from ..errors import NacFormatError
        from ..files import open_regular
        try:
            with open_regular(text) as fh:
                return np.load(fh, allow_pickle=False)
        except NacFormatError as e:
            raise CliError(f"{what} {e.reason}") from None
        except (OSError, ValueError) as e:
            raise CliError(f"{what} {text}: {e}") from None
    try:
        return parse_input_spec(text)
    except ValueError as e:
        raise CliError(f"{what}: {e}") from None


def _signature_inputs(path: str) -> dict:
    """Shapes and dtypes from the file's input signature (nac compile records it): the inputs a
    plain ``nac sim FILE`` uses; ``{}`` when the file has none (then missing inputs are reported)."""
    from ..cli_error import CliError
    from ..errors import NacFormatError
    from ..format import read
    from ..format.input_signature import read_input_signature
    from ..runtime.shapes import InputSpec
    try:
        nac = read(path)
        try:
            specs = read_input_signature(nac) or []
        finally:
            nac.close()
    except NacFormatError as e:
        raise CliError(f"{path}: {e}") from None
    return {s.name: InputSpec(tuple(s.shape), s.dtype) for s in specs}


def _overrides(sets) -> dict:
    from ..cli_error import CliError
    from .config import parse_value
    out = {}
    for s in sets or []:
        key, sep, val = s.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--set {s!r}: expected KEY=VALUE")
        out[key.strip()] = parse_value(val, key.strip())
    return out


def cmd_sim(args) -> int:
    from ..cli_inputs import load_imports
    load_imports(args.imports)
    from ..cli_error import CliError
    from ..errors import NacFormatError
    from .config import HardwareConfigError, load_hardware
    if not os.path.exists(args.file):
        raise CliError(f"{args.file}: no such file")
    if os.path.isdir(args.file):
        raise CliError(f"{args.file}: is a directory; give a .nac file")
    from ..cli_inputs import named_items, name_unnamed
    items = named_items(args.input)
    if any(name is None for name, _ in items):       # --input x.npy: the file's only input
        from ..format import read
        try:
            with read(args.file) as nac:
                items = name_unnamed(nac, items)
        except NacFormatError as e:
            raise CliError(f"{args.file}: {e}") from None
    inputs = {name: _value(val, f"--input {name}") for name, val in items}
    feeds = [_value(f, "--feed") for f in args.feed] if args.feed else None
    if not inputs and feeds is None:
        inputs = _signature_inputs(args.file)
    from ..runtime.shapes import parse_size
    try:
        budget = parse_size(args.cpu_budget)
    except ValueError as e:
        raise CliError(f"--cpu-budget: {e}") from None
    try:
        hw = load_hardware(args.hw, _overrides(args.sets))
        if args.scheduler and not args.sweep:
            raise CliError("--scheduler runs a --sweep; give --sweep KEY=V1,V2,...")
        if args.sweep:
            return _sweep(args, hw, inputs, feeds, budget)
        from .api import simulate
        result = simulate(args.file, hw, inputs=inputs or None, feeds=feeds, cpu_budget=budget)
    except HardwareConfigError as e:
        raise CliError(f"hardware: {e}") from None
    except NacFormatError as e:
        raise CliError(f"{args.file}: {e}") from None
    except (ValueError, TypeError) as e:
        raise CliError(f"{args.file}: {e}") from None
    except Exception as e:
        from ..cli_inputs import input_hint
        from ..runtime.errors import NacRuntimeError
        from ..runtime.errors import MissingInputError
        if isinstance(e, MissingInputError) and not inputs and feeds is None:
            from ..format.input_signature import missing_inputs_hint
            raise CliError(f"{args.file}: {e}{missing_inputs_hint(e.missing)}") from None
        if isinstance(e, NacRuntimeError):
            raise CliError(f"{args.file}: {e}{input_hint(inputs, feeds, e)}") from None
        raise
    if args.trace:
        from .trace import write_trace
        write_trace(result, args.trace)
    if args.csv:
        from ..format.writer import atomic_write
        atomic_write(args.csv, result.to_csv().encode("utf-8"))
    from ..format import read
    from .layers import format_layers, per_layer
    layers = per_layer(result, read(args.file))
    if args.json:
        out = result.to_json()
        out["layers"] = [vars(c) for c in layers]
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(result.summary())
        if layers:
            print(format_layers(layers))
        if args.trace:
            print(f"  trace: {args.trace} (open in https://ui.perfetto.dev)")
        if args.csv:
            print(f"  per-instruction table: {args.csv}")
    return 0


def _sweep(args, hw, inputs, feeds, budget) -> int:
    from .sweep import format_table, parse_axis, sweep
    axes = dict(parse_axis(s) for s in args.sweep)
    rows = sweep(args.file, hw, axes, inputs=inputs or None, feeds=feeds, workers=args.workers, cpu_budget=budget,
                 scheduler=args.scheduler)
    if args.json:
        json.dump([r.as_dict() for r in rows], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(f"{args.file} on {hw.name}: {len(rows)} point(s)")
        print(format_table(rows))
    return 1 if any(not r.ok for r in rows) else 0


__all__ = ["add_parser", "cmd_sim"]
