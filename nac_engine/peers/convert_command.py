"""``nac convert FILE -o OUT.nac``: a peer-format program as a NAC program (MIND Core IR today).

Argument parsing and printing only; the work is in the format's ``convert`` module. Refusals are
one line naming the source line (exit 2), never a traceback.
"""
from __future__ import annotations

import json
import os
import sys

#: peer format -> "module:function" taking (path, **options) and returning a result with ``.nac``
CONVERTERS = {"mind": ("nac_engine.peers.mind.convert", "convert_file")}


def add_parser(sub) -> None:
    s = sub.add_parser("convert", help="convert a peer-format program (MIND .ir / mic@2) to .nac")
    s.add_argument("file")
    s.add_argument("-o", "--output", required=True)
    s.add_argument("--version", choices=["1.6", "1.8"], default="1.6")
    s.add_argument("--mmap", choices=["min-peak", "reference"], default="min-peak")
    s.add_argument("--no-debug-info", action="store_true", help="no input signature / source map in RSRC")
    s.add_argument("--map", action="store_true", help="print the tick -> source line map")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_convert)


def cmd_convert(args) -> int:
    import importlib

    from ..cli_error import CliError
    from ..errors import NacFormatError
    from . import detect_file
    if not os.path.isfile(args.file):
        raise CliError(f"{args.file}: no such file")
    fmt = detect_file(args.file)
    if fmt not in CONVERTERS:
        raise CliError(f"{args.file}: no converter for format {fmt or 'unknown'!r} "
                       f"(convertible: {', '.join(CONVERTERS)})")
    mod_name, fn = CONVERTERS[fmt]
    convert = getattr(importlib.import_module(mod_name), fn)
    try:
        res = convert(args.file, version=args.version, mmap=args.mmap, debug_info=not args.no_debug_info)
    except NacFormatError as e:
        raise CliError(f"{args.file}: {e}") from None
    from ..compiler.external import write_compiled
    write_compiled(res.nac, args.output)
    n = len(res.nac.instructions)
    if args.json:
        print(json.dumps({"file": args.file, "format": fmt, "output": args.output, "instructions": n,
                          "tick_lines": {str(k): v for k, v in sorted(res.tick_lines.items())}}, indent=2))
    else:
        print(f"{args.output}: {n} instructions from {args.file} ({fmt})")
        if args.map:
            for tick, line in sorted(res.tick_lines.items()):
                sys.stdout.write(f"tick {tick}: line {line}\n")
    return 0
