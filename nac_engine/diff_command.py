"""``nac diff A.nac B.nac|--eager FILE.py:FACTORY|HF_DIR``: where two runs of a model part (see
:mod:`nac_engine.diff`). Outside ``runtime/`` so that building the parser does not load torch."""
from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
    s = sub.add_parser("diff", help="run two files on the same inputs and find where their values part",
                       description="Run A and B (or A and PyTorch eager of --eager FILE.py:FACTORY, or of a "
                                   "Hugging Face directory built as nac compile --hf built A) on the same "
                                   "inputs, match their values (source map, else op sequence, else outputs), and "
                                   "print each matched pair's errors and the first divergence. Exit 1 when they "
                                   "diverge.")
    s.add_argument("a", metavar="A.nac")
    s.add_argument("b", metavar="B.nac", nargs="?")
    s.add_argument("--eager", metavar="FILE.py:FACTORY|HF_DIR",
                   help="compare A with PyTorch eager of this model (a Hugging Face directory: with the --hf "
                        "options A was compiled with)")
    s.add_argument("--inputs", action="append", metavar="NAME=x.npy|NAME=SHAPE[:DTYPE]",
                   help="a named input (default: A's recorded input signature, seeded random)")
    s.add_argument("--seed", type=int, default=0, help="seed for generated inputs (default 0)")
    s.add_argument("--tolerance", type=float, default=1e-3, help="divergence threshold (default 1e-3)")
    s.add_argument("--metric", choices=("max_abs", "relative", "cosine"), default="max_abs",
                   help="what the tolerance applies to (cosine: 1 - cosine similarity); default max_abs")
    s.add_argument("--params", action="store_true", help="also compare parameter loads (quantised weights)")
    s.add_argument("--all", action="store_true", help="print every matched pair, not only the first 40")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    from .cli_inputs import add_import_argument
    add_import_argument(s)
    s.set_defaults(func=cmd_diff)


def _inputs(args, nac_path: str):
    from .cli_inputs import named_items, open_nac, run_inputs
    if not args.inputs:
        return None
    items = named_items(args.inputs, "--inputs")
    with open_nac(nac_path) as nac:
        return run_inputs(nac, items, args.seed)


def _check_file(label: str, path: str) -> None:
    import os
    from .cli_error import CliError
    if not os.path.exists(path):
        raise CliError(f"{label} {path}: no such file; give the path of an existing file")
    if not os.path.isfile(path):
        raise CliError(f"{label} {path}: not a regular file (a directory or a device); give a file")


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3g}"


def cmd_diff(args) -> int:
    from .cli_inputs import load_imports
    load_imports(args.imports)
    from .cli_error import CliError
    from .errors import NacFormatError
    from .format.input_signature import missing_inputs_hint
    from .diff import diff_eager, diff_files, is_hf_source
    from .runtime.errors import MissingInputError, NacRuntimeError
    if (args.b is None) == (args.eager is None):
        raise CliError("give B.nac or --eager FILE.py:FACTORY|HF_DIR (one of them)")
    # the arguments first: a mistake is said at once, before torch loads for the runs
    eager = None if args.eager is None or is_hf_source(args.eager) else \
        (args.eager.rpartition(":")[0] if ":" in args.eager else args.eager)
    for label, path in (("A", args.a), ("B", args.b), ("--eager", eager)):
        if path:
            _check_file(label, path)
    inputs = _inputs(args, args.a)
    try:
        if args.eager:
            res = diff_eager(args.a, args.eager, inputs, tolerance=args.tolerance, metric=args.metric, seed=args.seed)
        else:
            res = diff_files(args.a, args.b, inputs, tolerance=args.tolerance, metric=args.metric,
                             include_params=args.params, seed=args.seed)
    except MissingInputError as e:
        raise CliError(f"{e}{missing_inputs_hint(e.missing) if inputs is None else ''}") from None
    except (NacFormatError, NacRuntimeError, ValueError, OSError) as e:
        raise CliError(str(e)) from None
    if args.json:
        json.dump(res.to_json(), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 1 if res.diverged else 0
    print(f"{res.a_name} vs {res.b_name}: {len(res.pairs)} matched values ({res.method}), {len(res.outputs)} "
          f"output(s); {res.metric} tolerance {res.tolerance:g}")
    print(f"{'tick A':>7} {'tick B':>7}  {'max abs':>9} {'relative':>9} {'cosine':>9}  value")
    rows = res.pairs if args.all else res.pairs[:40]
    for p in rows + res.outputs:
        tb = "-" if p.tick_b is None else str(p.tick_b)
        flag = "  <-- over tolerance" if p.diverges else ""
        print(f"{p.tick_a:>7} {tb:>7}  {_fmt(p.max_abs):>9} {_fmt(p.relative):>9} {_fmt(p.cosine):>9}  "
              f"{p.label} ({p.op_a}){' ' + p.note if p.note else ''}{flag}")
    if len(rows) < len(res.pairs):
        print(f"  ... {len(res.pairs) - len(rows)} more (--all)")
    layers = res.layers()
    if len(layers) >= 2:
        print(f"error through the layers ({res.metric}):")
        width = max(len(name) for name, *_ in layers)
        print(f"  {'layer':<{width}}  {'values':>6}  {'at its end':>10}  {'largest':>9}")
        for name, n, last, top in layers:
            print(f"  {name:<{width}}  {n:>6}  {_fmt(last):>10}  {_fmt(top):>9}")
    for n in res.notes:
        print(f"note: {n}")
    first = res.first_divergence
    if first is None:
        print("no divergence")
        return 0
    where = f"tick {first.tick_a}" + ("" if first.tick_b is None else f" (B tick {first.tick_b})")
    print(f"first divergence: {where} {first.label} ({first.op_a}): {res.metric} "
          f"{_fmt(first.metric(res.metric))} > {res.tolerance:g}")
    return 1
