"""``nac asm FILE.ternsig -o OUT.tvmr``: the TVMR side of ``nac asm``.

``cmd_asm`` hands a source here when ``is_ternsig_source`` says it is one (a ``.ternsig`` name, or a
first directive only the TVMR form has); the bytes must decode back (and verify clean, unless
``--allow-problems``) before anything is written, atomically."""
from __future__ import annotations

import os

from ...errors import NacFormatError
from ...files import open_regular

TERNSIG_EXTENSIONS = (".ternsig",)
_TVMR_DIRECTIVES = (".meta", ".requires", ".registers", ".program", ".code")


def is_ternsig_source(path: str) -> bool:
    if os.path.splitext(path)[1].lower() in TERNSIG_EXTENSIONS:
        return True
    try:
        with open_regular(path) as fh:
            head = fh.read(4096).decode("utf-8", "replace")
    except (OSError, NacFormatError):
        return False
    for line in head.splitlines():
        s = line.strip()
        if not s or s.startswith(";"):
            continue
        return s.split(";")[0].strip().lower() in _TVMR_DIRECTIVES
    return False


def asm_command(args, error_type) -> int:
    """Assemble ``args.text`` into ``args.output``; problems raise ``error_type`` (the CLI's one-line error)."""
    from ...format.writer import atomic_write
    from .asm import MAX_SOURCE, TvmrAsmError, assemble
    from .format import decode
    try:
        with open_regular(args.text) as fh:
            if os.fstat(fh.fileno()).st_size > MAX_SOURCE:
                raise error_type(f"{args.text}: larger than the {MAX_SOURCE:,}-byte limit for assembly source")
            text = fh.read().decode("utf-8")
    except NacFormatError as e:
        raise error_type(e.reason) from None
    except UnicodeDecodeError as e:
        raise error_type(f"{args.text}: not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8") from None
    except OSError as e:
        raise error_type(f"{args.text}: {e.strerror or e}") from None
    try:
        data = assemble(text)
    except TvmrAsmError as e:
        raise error_type(f"{args.text}: {e}") from None
    f = decode(data)
    problems = [p for p in f.verify() if getattr(p, "severity", "error") == "error"]
    if problems and not getattr(args, "allow_problems", False):
        raise error_type(f"{args.text}: the assembled program has problems ({problems[0]}); nothing written "
                         "(--allow-problems to write anyway)")
    atomic_write(args.output, data)
    print(f"{args.output}: {len(data):,} bytes, {len(f.registers)} registers, {len(f.instructions)} instructions "
          f"(TVMR v1)")
    return 0
