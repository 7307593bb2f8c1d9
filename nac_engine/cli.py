"""The ``nac`` command: argument parsing and printing only; the work is in the engine.

Errors are one line on stderr (``nac: error: ...``) and a non-zero exit, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .errors import NacEncodeError, NacFormatError, summarised
from .files import open_regular

#: One rule for every command (also in `nac --help` and the README): 0 ok; 1 the answer is no
#: (verify problems, lint violations, diff diverged, a sweep with failed rows); 2 the user's mistake,
#: a bad file or a refused model; 3 an internal error (a bug of ours: please report it).
EXIT_OK, EXIT_PROBLEMS, EXIT_UNREADABLE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_CODES_HELP = ("exit codes (every command): 0 ok; 1 the answer is no (verify problems, lint violations, "
                   "diff diverged, a sweep with failed rows); 2 your mistake, a bad file or a refused model; "
                   "3 an internal error (please report it, with `nac --version`)")


from .cli_error import CliError  # noqa: E402  (one class whether cli.py runs as __main__ or not)
from .cli_inputs import input_hint, load_npy as _load_npy, open_nac as _open, open_peer_file as _open_peer  # noqa: E402
from .cli_inputs import converted_peer, named_items, run_inputs  # noqa: E402
from .cli_inputs import add_import_argument, load_imports  # noqa: E402


def cmd_info(args) -> int:
    from .format.summary import format_summary, summarize
    peer = _open_peer(args.file)
    if peer is not None:
        print(json.dumps(peer.summary(), indent=2, default=str) if args.json else peer.format_summary())
        return EXIT_OK
    with _open(args.file, strict=False) as nac:
        s = summarize(nac)
    print(json.dumps(s, indent=2) if args.json else format_summary(s))
    return EXIT_OK


def cmd_verify(args) -> int:
    from .format.reader import read
    from .format.verify import verify
    peer = _open_peer(args.file)
    if peer is not None:
        problems = peer.verify()
        if args.json:
            print(json.dumps({"file": args.file, "format": peer.format, "ok": not problems,
                              "problems": [p.to_dict() for p in problems]}, indent=2))
        else:
            for p in summarised(problems):
                print(f"{args.file}: {p}" if isinstance(p, str) else
                      f"{args.file}: {'warning: ' if getattr(p, 'severity', '') == 'warning' else ''}{p}")
            if not problems:
                print(f"{args.file}: ok ({peer.format})")
        from .peers import is_warning
        return EXIT_PROBLEMS if any(not is_warning(p) for p in problems) else EXIT_OK
    try:
        nac = read(args.file, strict=False)
    except OSError as e:
        raise CliError(f"{args.file}: {e.strerror or e}") from None
    with nac:
        problems = verify(nac)
        fatal = not nac.header_decoded
        if not fatal and not args.bytes_only:
            # the ops a run would have no kernel for (imports torch; --bytes-only skips it)
            from .runtime.readiness import kernel_problems
            try:
                problems = sorted(problems + kernel_problems(nac), key=lambda p: p.offset)
            except NacFormatError as e:         # an instruction that does not decode: verify said so
                problems.append(e)
    if args.json:
        print(json.dumps({"file": args.file, "ok": not problems, "problems": [p.to_dict() for p in problems]},
                         indent=2))
    else:
        for p in summarised(problems):
            print(f"{args.file}: {p}" if isinstance(p, str) else f"{args.file}: {p.section} @ {p.offset:#x}: {p.reason}")
        if not problems:
            print(f"{args.file}: ok")
    if fatal:
        return EXIT_UNREADABLE
    return EXIT_PROBLEMS if problems else EXIT_OK


def cmd_dis(args) -> int:
    from .text.disasm import iter_disassembly
    peer = _open_peer(args.file)
    if peer is not None:
        text = peer.disassemble()
        if text is None:
            raise CliError(f"{args.file}: the {peer.format} format has no text form")
        if args.output:
            from .format.writer import atomic_write
            atomic_write(args.output, text.encode("utf-8"))
        else:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return EXIT_OK
    with _open(args.file, strict=False) as nac:
        for p in summarised(nac.problems):
            print(f"nac: warning: {p}", file=sys.stderr)
        lines = iter_disassembly(nac, mmap_comments=args.mmap, source_name=os.path.basename(args.file))
        if args.output:     # all or nothing: a killed dis leaves the old file (or none), never half a text
            from .format.writer import atomic_produce
            atomic_produce(args.output, lambda fh, _tmp: fh.writelines((line + "\n").encode("utf-8")
                                                                       for line in lines))
        else:
            for line in lines:
                sys.stdout.write(line + "\n")
    return EXIT_OK


def cmd_asm(args) -> int:
    from .peers.tvmr.command import asm_command, is_ternsig_source
    if is_ternsig_source(args.text):       # TVMR assembly (seed 004) -> .tvmr
        return asm_command(args, CliError)
    from .format.writer import atomic_write, encode
    from .text.asm import assemble
    from .text.textops import TextError
    try:
        with open_regular(args.text) as fh:
            text = fh.read().decode("utf-8")
    except NacFormatError as e:
        raise CliError(e.reason) from None
    except UnicodeDecodeError as e:
        raise CliError(f"{args.text}: not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8") from None
    except OSError as e:
        raise CliError(f"{args.text}: {e.strerror or e}") from None
    try:
        nac = assemble(text, weights=args.weights)
        data = encode(nac)
    except TextError as e:
        raise CliError(f"{args.text}: {e}") from None
    except LookupError as e:
        raise CliError(str(e).strip("'\"")) from None
    except (NacEncodeError, NacFormatError) as e:
        raise CliError(str(e)) from None
    except (ValueError, OverflowError) as e:     # the assembler's own checks, in the user's terms
        raise CliError(f"{args.text}: {e}") from None
    _check_assembled(data, args)
    atomic_write(args.output, data)
    print(f"{args.output}: {len(data):,} bytes, {len(nac.instructions)} instructions")
    return EXIT_OK


def _check_assembled(data: bytes, args) -> None:
    """asm checks what it writes: the bytes must read back, and (unless --allow-problems) verify
    clean, so an edit such as a duplicated .tensor or a schedule entry past the last instruction
    is refused here rather than discovered by the next tool."""
    from .format.reader import read
    from .format.verify import verify
    try:
        read(data).close()
    except NacFormatError as e:
        raise CliError(f"{args.text}: the assembled file would not read back: {e}; nothing written") from None
    if args.allow_problems:
        return
    nac = read(data, strict=False)
    if not nac.header.weights_internal:
        nac.weights_path = os.path.splitext(os.path.abspath(args.output))[0] + ".safetensors"
    # external weights not yet beside the output are the user's next step, not an assembly fault
    problems = [p for p in verify(nac) if not p.reason.startswith("weights are external and")]
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CliError(f"{args.text}: the assembled file does not verify: {first.section} @ {first.offset:#x}: "
                       f"{first.reason}{more}; nothing written (--allow-problems writes it anyway)",
                       EXIT_PROBLEMS)


def cmd_span(args) -> int:
    try:
        offset = int(args.offset, 0)
    except ValueError:
        raise CliError(f"offset {args.offset!r} is not a number (decimal or 0x-hex)") from None
    peer = _open_peer(args.file)
    if peer is not None:
        return _print_span(peer, peer.data, offset, args.json)
    with _open(args.file, strict=False) as nac:
        return _print_span(nac, nac.buffer, offset, args.json)


def _print_span(f, buf, offset: int, as_json: bool) -> int:
    """``nac span`` for any decoded file ``f`` (NAC or peer) whose bytes are ``buf``."""
    if not 0 <= offset < f.size:
        raise CliError(f"offset {offset} is outside the file (0..{f.size - 1})")
    leaf = f.span_at(offset)
    chain = []
    node = leaf
    while node is not None and node.parent is not None:
        chain.append(node)
        node = node.parent
    if as_json:
        print(json.dumps({"offset": offset, "leaf": leaf.to_dict(), "ancestors": [s.to_dict() for s in chain[1:]]},
                         indent=2))
        return EXIT_OK
    raw = bytes(buf[leaf.offset:leaf.offset + min(leaf.length, 32)])
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


def _print_findings(label: str, findings) -> None:
    for f in findings:
        print(f"  {label} tick {f.tick}: {f.kind}: {f.message}")


def _save_npy(path: str, arr) -> None:
    """An output as .npy, written whole (an earlier run's file stays until this one is complete)."""
    import numpy as np

    from .format.writer import atomic_produce
    atomic_produce(path, lambda fh, _tmp: np.save(fh, np.asarray(arr), allow_pickle=False))


def _output_line(i: int, arr, label: str = "") -> str:
    """``output I (NAME): DTYPE[SHAPE]  min … max … mean … std …`` (the statistics for numbers only)."""
    import numpy as np
    line = f"{label or f'output {i}'}: {arr.dtype}{list(arr.shape)}"
    if arr.size and np.issubdtype(arr.dtype, np.number):
        f = arr.astype(np.float64)
        line += f"  min {f.min():.6g} max {f.max():.6g} mean {f.mean():.6g} std {f.std():.6g}"
    return line


def _run_tvmr(args, peer) -> int:
    """``nac run FILE.tvmr``: the TVMR interpreter to HALT; ``--feed x.npy`` is the program's input
    (default: seeded random values for its input register), ``--seed`` also seeds synthetic weights."""
    import numpy as np
    if args.input or args.breaks or args.check_mmap:
        raise CliError(f"{args.file}: a TVMR program takes one input, given with --feed x.npy "
                       "(--input, --break and --check-mmap are NAC options)")
    if args.feed and len(args.feed) > 1:
        raise CliError(f"{args.file}: a TVMR program takes one input; {len(args.feed)} --feed files given")
    feed = _load_npy(args.feed[0]) if args.feed else None
    from .peers.tvmr.interp import TvmrRuntimeError
    try:
        machine = peer.machine(inputs=feed, seed=args.seed)
        machine.run()
    except (TvmrRuntimeError, ValueError) as e:
        raise CliError(f"{args.file}: {e}") from None
    if machine.error:
        raise CliError(f"{args.file}: {machine.error}")
    out = machine.output
    print(f"{len(machine.steps)} instructions executed" + (", halted" if machine.halted else "")
          + (f"; {len(machine.host_ops)} host operation(s)" if machine.host_ops else ""))
    if out is None:
        print("output: none (the program wrote no output buffer)")
        return EXIT_OK
    arr = np.asarray(out)
    print(_output_line(0, arr))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        _save_npy(os.path.join(args.out, "output_0.npy"), arr)
    return EXIT_OK


def cmd_run(args) -> int:
    import numpy as np
    from .runtime.errors import NacRuntimeError
    peer = _open_peer(args.file)
    if peer is not None and peer.format == "tvmr":
        return _run_tvmr(args, peer)
    items = named_items(args.input)
    feeds = [_load_npy(p) for p in args.feed] if args.feed else None
    load_imports(args.imports)
    with (converted_peer(args.file, peer.format) if peer is not None else _open(args.file)) as nac:
        # none given: a freshly compiled file records its inputs
        inputs = run_inputs(nac, items, args.seed, default=not items and feeds is None)
        try:
            if args.breaks:
                outputs = _run_with_breakpoints(nac, inputs or None, feeds, args.breaks)
            elif args.check_mmap:
                from .runtime.mmap_check import trace_memory
                trace = trace_memory(nac, inputs=inputs or None, feeds=feeds)
                outputs = trace.outputs
            else:
                from .runtime.session import Session
                with Session(nac, inputs=inputs or None, feeds=feeds) as session:
                    outputs = session.run()
        except NacRuntimeError as e:
            from .runtime.errors import MissingInputError
            if isinstance(e, MissingInputError) and not inputs and feeds is None:
                from .format.input_signature import missing_inputs_hint
                raise CliError(f"{args.file}: {e}{missing_inputs_hint(e.missing)}") from None
            raise CliError(f"{args.file}: {e}{input_hint(inputs, feeds, e, nac)}") from None
    refs = [_load_npy(p) for p in args.compare or []]
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    worst = 0.0
    from .format.output_names import output_labels
    labels = output_labels(nac, len(outputs))
    for i, out in enumerate(outputs):
        arr = np.asarray(out)
        line = _output_line(i, arr, labels[i])
        if i < len(refs):
            ref = refs[i].astype(np.float64)
            if ref.shape != arr.shape:
                line += f"  compare: shape {list(ref.shape)} differs"
                worst = float("inf")
            else:
                abs_err = float(np.abs(arr.astype(np.float64) - ref).max()) if ref.size else 0.0
                rel = abs_err / max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-30)
                worst = max(worst, rel)
                line += f"  max abs err {abs_err:.3g}, rel {rel:.3g}"
        print(line)
        if args.out:
            _save_npy(os.path.join(args.out, f"output_{i}.npy"), arr)
    if args.check_mmap:
        print(f"memory: peak live {trace.peak:,} bytes at tick {trace.peak_tick}; "
              f"{len(trace.violations)} violation(s), {len(trace.hazards)} hazard(s)")
        _print_findings("violation", trace.violations)
        if args.verbose:
            _print_findings("hazard", trace.hazards)
        if trace.violations:
            return EXIT_PROBLEMS
    if refs and args.tolerance is not None and worst > args.tolerance:
        print(f"compare: worst relative error {worst:.3g} exceeds {args.tolerance:g}")
        return EXIT_PROBLEMS
    return EXIT_OK


def _parse_break(spec: str) -> dict:
    """``tick:N``, ``op:GLOB``, ``param:GLOB``, ``nan``, ``inf``, ``if:EXPR``; a location may add
    ``@EXPR`` as a condition (``op:aten.softmax*@max(abs(x)) > 1e3``)."""
    where, _, cond = spec.partition("@")
    kind, _, arg = where.partition(":")
    if kind in ("nan", "inf") and not arg:
        return {"condition": kind}
    if kind == "if":
        return {"condition": arg + ("@" + cond if cond else "")}
    if kind not in ("tick", "op", "param") or not arg:
        raise CliError(f"--break {spec!r}: expected tick:N, op:GLOB, param:GLOB, nan, inf or if:EXPR")
    out = {kind: int(arg, 0) if kind == "tick" else arg}
    if cond:
        out["condition"] = cond
    return out


def _run_with_breakpoints(nac, inputs, feeds, specs):
    from .runtime.debugger import Debugger
    from .runtime.expr import ExprError
    dbg = Debugger(nac, inputs=inputs, feeds=feeds)
    for spec in specs:
        try:
            dbg.add_breakpoint(**_parse_break(spec))
        except (ValueError, ExprError, LookupError, RecursionError) as e:
            shown = spec if len(spec) <= 80 else spec[:77] + "..."
            raise CliError(f"--break {shown!r}: {e}") from None
    while True:
        stop = dbg.continue_()
        if stop.kind != "breakpoint":
            break
        r = dbg.result(stop.tick)
        stats = "" if r.tensor is None else (
            f" {r.dtype}{list(r.shape)} min {r.min:.6g} max {r.max:.6g} mean {r.mean:.6g}"
            f" nan {r.nan_count} inf {r.inf_count}" if r.min is not None else f" {r.dtype}{list(r.shape)}")
        print(f"break at tick {stop.tick}: v{stop.tick} = {r.name}{stats}")
    return dbg.outputs


def cmd_dap(args) -> int:
    from .dap.server import serve_stdio, serve_tcp
    if args.port is not None:
        if not 0 <= args.port <= 65535:
            raise CliError(f"--port {args.port} is not a TCP port")
        return serve_tcp(args.port)
    return serve_stdio()


def cmd_lint(args) -> int:
    from .format.mmap_lint import check_schedule   # torch-free: lint starts as fast as info
    with _open(args.file) as nac:
        report = check_schedule(nac)
    if args.json:
        as_dict = lambda f: {"kind": f.kind, "tick": f.tick, "target": f.target, "message": f.message}  # noqa: E731
        print(json.dumps({"file": args.file, "has_schedule": report.has_schedule,
                          "violations": [as_dict(f) for f in report.violations],
                          "hazards": [as_dict(f) for f in report.hazards]}, indent=2))
    else:
        if not report.has_schedule:
            print(f"{args.file}: no MMAP schedule (nothing to check)")
        for f in report.violations:
            print(f"{args.file}: tick {f.tick}: {f.kind}: {f.message}")
        if args.hazards:
            for f in report.hazards:
                print(f"{args.file}: tick {f.tick}: hazard {f.kind}: {f.message}")
        print(f"{args.file}: {len(report.violations)} violation(s), {len(report.hazards)} same-tick hazard(s)"
              + ("" if args.hazards or not report.hazards else " (--hazards to list)"))
    return EXIT_PROBLEMS if report.violations else EXIT_OK


# --------------------------------------------------------------------------- parser
class _Version(argparse.Action):
    """``--version``: the versions a bug report needs (read only when asked)."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        from .diagnostics import report
        print(report())
        parser.exit(EXIT_OK)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nac", description="Inspect, verify, disassemble and rewrite NAC files.",
                                epilog=EXIT_CODES_HELP)
    p.add_argument("--version", action=_Version,
                   help="this tool's version and those of Python, torch, numpy... (paste it into a bug report)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("info", help="header, sections, counts, parameters, inputs/outputs")
    s.add_argument("file")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_info)

    s = sub.add_parser("verify", help="check a file; exit 0 clean, 1 problems, 2 unreadable")
    s.add_argument("file")
    s.add_argument("--json", action="store_true")
    s.add_argument("--bytes-only", action="store_true",
                   help="check the bytes only, not that every op has a kernel (skips importing torch)")
    s.set_defaults(func=cmd_verify)

    s = sub.add_parser("dis", help="disassemble to text (assembles back with `nac asm`)")
    s.add_argument("file")
    s.add_argument("--mmap", action="store_true", help="annotate each instruction with its tick's MMAP commands")
    s.add_argument("-o", "--output", help="write to a file instead of stdout")
    s.set_defaults(func=cmd_dis)

    s = sub.add_parser("asm", help="assemble text into a .nac (or .ternsig source into a .tvmr)")
    s.add_argument("text")
    s.add_argument("-o", "--output", required=True)
    s.add_argument("--weights", metavar="FROM", help="original .nac or a .safetensors holding tensors by name")
    s.add_argument("--allow-problems", action="store_true",
                   help="write the file even when `nac verify` would report problems in it")
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

    s = sub.add_parser("run", help="execute a file and print its outputs")
    s.add_argument("file")
    s.add_argument("--input", action="append", metavar="NAME=x.npy|NAME=SHAPE[:DTYPE]|NAME=[VALUES]",
                   help="a named user input: an .npy file, a shape (x=1x8:int64) filled with seeded "
                        "random values (see --seed), or the values themselves (input_ids=[1,15043,29892]); "
                        "a file with one input takes it without NAME= (--input x.npy)")
    s.add_argument("--seed", type=int, default=0, help="seed for --input SHAPE values (default 0)")
    s.add_argument("--feed", action="append", metavar="x.npy",
                   help="positional value for each <INPUT B=0>/<INPUT B=3> in instruction order")
    s.add_argument("--out", metavar="DIR", help="write output_<i>.npy here")
    s.add_argument("--compare", action="append", metavar="ref.npy", help="reference for output i (in order)")
    s.add_argument("--tolerance", type=float, metavar="REL",
                   help="with --compare: exit 1 if the relative error exceeds REL")
    s.add_argument("--break", dest="breaks", action="append", metavar="SPEC",
                   help="stop and print at tick:N, op:GLOB, param:GLOB, nan, inf or if:EXPR (repeatable)")
    add_import_argument(s)
    s.add_argument("--check-mmap", action="store_true", help="execute the MMAP schedule too and report it")
    s.add_argument("-v", "--verbose", action="store_true", help="with --check-mmap: list hazards too")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("lint", help="static MMAP schedule check; exit 1 on violations")
    s.add_argument("file")
    s.add_argument("--hazards", action="store_true", help="also list same-tick hazards")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_lint)
    s = sub.add_parser("dap", help="a Debug Adapter Protocol server (for VS Code, nvim-dap, dape, ...)")
    s.add_argument("--port", type=int, metavar="N",
                   help="listen on 127.0.0.1:N instead of standard input/output (0: any free port)")
    s.set_defaults(func=cmd_dap)
    from .sim.command import add_parser as _add_sim; _add_sim(sub)  # noqa: E702
    from .compiler.command import add_parser as _add_compile; _add_compile(sub)  # noqa: E702
    from .peers.convert_command import add_parser as _add_convert; _add_convert(sub)  # noqa: E702
    from .diff_command import add_parser as _add_diff; _add_diff(sub)  # noqa: E702
    from .profile_command import add_parser as _add_profile; _add_profile(sub)  # noqa: E702
    from .generate import add_parser as _add_generate; _add_generate(sub)  # noqa: E702
    return p


#: Files from this size get a closing line on stderr from the commands that only look at them:
#: how long the command took and its peak memory (on a multi-GB model that is worth knowing;
#: on a small one it is noise).
COST_LINE_MIN_BYTES = 64 << 20
_COST_COMMANDS = ("info", "verify", "dis", "lint")


def _file_bytes(args) -> int:
    """The size of the file a looking command was given, with its external weights (0 if unknown)."""
    path = getattr(args, "file", None)
    if not isinstance(path, str):
        return 0
    total = 0
    for p in (path, os.path.splitext(path)[0] + ".safetensors"):
        try:
            total += os.stat(p).st_size
        except OSError:
            pass
    return total


def _cost_line(command: str, size: int, seconds: float) -> str:
    try:
        import resource
        peak = f", peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
    except (ImportError, OSError):      # not on every platform
        peak = ""
    return f"nac {command}: {size / 1e9:.2f} GB of file in {seconds:.2f} s{peak}"


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = getattr(args, "command", None)
    size = _file_bytes(args) if command in _COST_COMMANDS else 0
    started = time.perf_counter()
    try:
        code = args.func(args)
        if size >= COST_LINE_MIN_BYTES:
            print(_cost_line(command, size, time.perf_counter() - started), file=sys.stderr)
        return code
    except CliError as e:
        print("nac: error: " + one_line(str(e)), file=sys.stderr)
        return e.code
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        print("nac: interrupted", file=sys.stderr)
        return 130
    except (NacFormatError, NacEncodeError) as e:   # a file's problem reached here: still the user's to fix
        print("nac: error: " + one_line(e.message if isinstance(e, NacFormatError) else str(e)), file=sys.stderr)
        return EXIT_UNREADABLE
    except OSError as e:      # a path the user gave cannot be read or written
        where = f"{e.filename}: " if e.filename else ""
        print("nac: error: " + one_line(f"{where}{e.strerror or e}"), file=sys.stderr)
        return EXIT_UNREADABLE
    except Exception as e:   # last resort: one line, never a traceback wall
        print("nac: error: internal error: " + one_line(f"{type(e).__name__}: {e}") + " (please report it, with "
              "`nac --version`)", file=sys.stderr)
        return EXIT_INTERNAL


#: Longest error line printed: a hostile file can put megabytes into a reason (a constant's text).
MESSAGE_LIMIT = 600


def one_line(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """Whitespace collapsed to single spaces and capped at ``limit`` characters."""
    text = " ".join(message[:4 * limit].split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
