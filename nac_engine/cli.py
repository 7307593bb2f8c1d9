"""The ``nac`` command: argument parsing and printing only; the work is in the engine.

Errors are one line on stderr (``nac: error: ...``) and a non-zero exit, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from .errors import NacEncodeError, NacFormatError

EXIT_OK, EXIT_PROBLEMS, EXIT_UNREADABLE = 0, 1, 2


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_UNREADABLE):
        super().__init__(message)
        self.code = code


def _open(path: str, strict: bool = True):
    from .format.reader import read
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    try:
        nac = read(path, strict=strict)
    except NacFormatError as e:
        raise CliError(f"{path}: {e}") from None
    except OSError as e:
        raise CliError(f"{path}: {e.strerror or e}") from None
    if not nac.header_decoded:
        reason = nac.problems[0] if nac.problems else "not a NAC file"
        nac.close()
        raise CliError(f"{path}: {reason}")
    return nac


# --------------------------------------------------------------------------- commands
def cmd_info(args) -> int:
    from .format.summary import format_summary, summarize
    with _open(args.file, strict=False) as nac:
        s = summarize(nac)
    print(json.dumps(s, indent=2) if args.json else format_summary(s))
    return EXIT_OK


def cmd_verify(args) -> int:
    from .format.reader import read
    from .format.verify import verify
    if not os.path.exists(args.file):
        raise CliError(f"{args.file}: no such file")
    try:
        nac = read(args.file, strict=False)
    except OSError as e:
        raise CliError(f"{args.file}: {e.strerror or e}") from None
    with nac:
        problems = verify(nac)
        fatal = not nac.header_decoded
    if args.json:
        print(json.dumps({"file": args.file, "ok": not problems, "problems": [p.to_dict() for p in problems]},
                         indent=2))
    else:
        for p in problems:
            print(f"{args.file}: {p.section} @ {p.offset:#x}: {p.reason}")
        if not problems:
            print(f"{args.file}: ok")
    if fatal:
        return EXIT_UNREADABLE
    return EXIT_PROBLEMS if problems else EXIT_OK


def cmd_dis(args) -> int:
    from .isa.disasm import iter_disassembly
    with _open(args.file, strict=False) as nac:
        for p in nac.problems:
            print(f"nac: warning: {p}", file=sys.stderr)
        out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
        try:
            for line in iter_disassembly(nac, mmap_comments=args.mmap, source_name=os.path.basename(args.file)):
                out.write(line + "\n")
        finally:
            if args.output:
                out.close()
    return EXIT_OK


def cmd_asm(args) -> int:
    from .format.writer import write
    from .isa.asm import assemble
    from .isa.textops import TextError
    try:
        with open(args.text, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise CliError(f"{args.text}: {e.strerror or e}") from None
    try:
        nac = assemble(text, weights=args.weights)
        data = write(nac, args.output)
    except TextError as e:
        raise CliError(f"{args.text}: {e}") from None
    except LookupError as e:
        raise CliError(str(e).strip("'\"")) from None
    except (NacEncodeError, NacFormatError) as e:
        raise CliError(str(e)) from None
    print(f"{args.output}: {len(data):,} bytes, {len(nac.instructions)} instructions")
    return EXIT_OK


def cmd_span(args) -> int:
    try:
        offset = int(args.offset, 0)
    except ValueError:
        raise CliError(f"offset {args.offset!r} is not a number (decimal or 0x-hex)") from None
    with _open(args.file, strict=False) as nac:
        if not 0 <= offset < nac.size:
            raise CliError(f"offset {offset} is outside the file (0..{nac.size - 1})")
        leaf = nac.span_at(offset)
        chain = []
        node = leaf
        while node is not None and node.parent is not None:
            chain.append(node)
            node = node.parent
        if args.json:
            print(json.dumps({"offset": offset, "leaf": leaf.to_dict(), "ancestors": [s.to_dict() for s in chain[1:]]},
                             indent=2))
            return EXIT_OK
        raw = bytes(nac._buf[leaf.offset:leaf.offset + min(leaf.length, 32)])
        print(f"byte {offset} ({offset:#x}) belongs to {leaf.path}")
        print(f"  field  {leaf.type or '-'} at {leaf.offset} ({leaf.offset:#x}), {leaf.length} bytes: "
              f"{raw.hex(' ')}{' …' if leaf.length > 32 else ''}")
        print(f"  value  {leaf.value!r}")
        for s in chain[1:]:
            print(f"  in     {s.path or s.name} [{s.offset}..{s.end}) {s.type}"
                  + (f" = {s.value}" if s.value not in (None, "") and not isinstance(s.value, (bytes, bytearray)) else ""))
    return EXIT_OK


def cmd_rewrite(args) -> int:
    from .format.writer import write
    with _open(args.file) as nac:
        try:
            data = write(nac, args.output, version=args.version)
        except NacEncodeError as e:
            raise CliError(str(e)) from None
    print(f"{args.output}: NAC v{args.version or nac.version}, {len(data):,} bytes")
    return EXIT_OK


# --------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nac", description="Inspect, verify, disassemble and rewrite NAC files.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("info", help="header, sections, counts, parameters, inputs/outputs")
    s.add_argument("file")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_info)

    s = sub.add_parser("verify", help="check a file; exit 0 clean, 1 problems, 2 unreadable")
    s.add_argument("file")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser("dis", help="disassemble to text (assembles back with `nac asm`)")
    s.add_argument("file")
    s.add_argument("--mmap", action="store_true", help="annotate each instruction with its tick's MMAP commands")
    s.add_argument("-o", "--output", help="write to a file instead of stdout")
    s.set_defaults(func=cmd_dis)

    s = sub.add_parser("asm", help="assemble text into a .nac")
    s.add_argument("text")
    s.add_argument("-o", "--output", required=True)
    s.add_argument("--weights", metavar="FROM", help="original .nac or a .safetensors holding tensors by name")
    s.set_defaults(func=cmd_asm)

    s = sub.add_parser("span", help="which field owns the byte at OFFSET")
    s.add_argument("file")
    s.add_argument("offset", help="decimal or 0x-hex")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_span)

    s = sub.add_parser("rewrite", help="re-encode, optionally as another version")
    s.add_argument("file")
    s.add_argument("-o", "--output", required=True)
    s.add_argument("--version", choices=["1.6", "1.7", "1.8"])
    s.set_defaults(func=cmd_rewrite)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except CliError as e:
        print(f"nac: error: {e}", file=sys.stderr)
        return e.code
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        print("nac: interrupted", file=sys.stderr)
        return 130
    except Exception as e:   # last resort: one line, never a traceback wall
        print(f"nac: error: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_UNREADABLE


if __name__ == "__main__":
    sys.exit(main())
