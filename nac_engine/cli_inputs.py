"""What the ``nac`` subcommands share: opening the user's file, and making inputs from ``--input``.

Each refusal is a :class:`CliError` naming the argument. In its own module so that the
subcommands living outside ``cli.py`` (sim, diff, convert) need not import the command line."""
from __future__ import annotations

import os
from typing import Optional

from .cli_error import CliError
from .errors import NacFormatError, with_compile_hint
from .files import open_regular


def _refuse_directory(path: str) -> None:
    if os.path.isdir(path):
        raise CliError(f"{path}: {with_compile_hint(path, 'is a directory; give a .nac file')}")


def open_nac(path: str, strict: bool = True):
    from .format.reader import read
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    _refuse_directory(path)
    try:
        nac = read(path, strict=strict)
    except NacFormatError as e:
        raise CliError(f"{path}: {with_compile_hint(path, str(e))}") from None
    except OSError as e:
        raise CliError(f"{path}: {e.strerror or e}") from None
    if not nac.header_decoded:
        reason = nac.problems[0] if nac.problems else "not a NAC file"
        nac.close()
        raise CliError(f"{path}: {with_compile_hint(path, str(reason))}")
    return nac


def open_peer_file(path: str):
    """The peer-format file at ``path`` decoded leniently, or ``None`` when it is NAC (or unknown:
    the NAC reader then says what is wrong with it)."""
    from .peers import detect_file, open_peer
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    _refuse_directory(path)
    try:
        fmt = detect_file(path)
    except OSError as e:
        raise CliError(f"{path}: {e.strerror or e}") from None
    if fmt in (None, "nac"):
        return None
    try:
        return open_peer(path, fmt, strict=False)
    except NacFormatError as e:
        raise CliError(f"{path}: {e}") from None
    except OSError as e:
        raise CliError(f"{path}: {e.strerror or e}") from None


# --------------------------------------------------------------------------- commands
def converted_peer(path: str, fmt: str, command: str = "nac run"):
    """A peer-format program converted to NAC in memory (``nac run model.ir``), as ``nac convert``
    would write it."""
    import importlib
    import sys
    from .peers.convert_command import CONVERTERS
    if fmt not in CONVERTERS:
        raise CliError(f"{path}: `{command}` takes NAC and convertible programs ({', '.join(CONVERTERS)}); "
                       f"a {fmt} file has no converter")
    mod_name, fn = CONVERTERS[fmt]
    try:
        res = getattr(importlib.import_module(mod_name), fn)(path)
    except NacFormatError as e:
        raise CliError(f"{path}: {e}") from None
    print(f"{path}: converted from {fmt} to NAC in memory ({len(res.nac.instructions)} instructions)",
          file=sys.stderr)
    return res.nac


def load_npy(path: str):
    import numpy as np
    try:
        with open_regular(path) as fh:
            return np.load(fh, allow_pickle=False)
    except NacFormatError as e:
        raise CliError(e.reason) from None
    except (OSError, ValueError) as e:
        raise CliError(f"{path}: cannot load as .npy ({e})") from None


def named_items(items, option: str = "--input") -> list[tuple[Optional[str], str]]:
    """``NAME=VALUE`` options as ``(name, value)`` pairs; a value without ``NAME=`` (``x.npy``) is
    ``(None, value)``, for :func:`name_unnamed` to give to the file's only input; one line naming
    ``option`` for anything else."""
    out = []
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep and item:
            out.append((None, item))
            continue
        if not name:
            raise CliError(f"{option} expects NAME=file.npy or NAME=SHAPE[:DTYPE] (x=1x8:int64), got {item!r}")
        out.append((name, value))
    return out


def name_unnamed(nac, items) -> list:
    """``items`` with a value given without ``NAME=`` named after the file's only input; with more
    than one, the user is asked which."""
    if all(name is not None for name, _ in items):
        return items
    names = list(dict.fromkeys(nac.input_name_map.values()))
    if len(names) != 1:
        value = next(v for n, v in items if n is None)
        listed = ", ".join(names) if names else "none named"
        raise CliError(f"--input {value}: which input is it? give NAME={value}; this file's inputs: {listed}")
    return [(names[0] if name is None else name, value) for name, value in items]


def split_inputs(items, base_dirs=()) -> tuple[dict, list]:
    """``(name, text)`` pairs as the user gave them (``x=x.npy``, ``x=1x8:int64``): the .npy files
    loaded (a relative path looked for under each of ``base_dirs`` in turn, then where it is), and
    the ``(name, SHAPE[:DTYPE])`` pairs left for :func:`shaped_inputs`."""
    loaded, shaped = {}, []
    for name, value in items:
        candidates = [] if os.path.isabs(value) else [os.path.join(d, value) for d in base_dirs]
        path = next((c for c in candidates if os.path.exists(c)), value)
        if value.endswith(".npy") or os.path.isfile(path):
            loaded[name] = load_npy(path)
        else:
            shaped.append((name, value))
    return loaded, shaped


def shaped_inputs(nac, shaped, seed: int) -> dict:
    """``--input NAME=SHAPE[:DTYPE]``: seeded random values of that shape, drawn from the value
    range the file's input signature records for NAME (token ids stay in the vocabulary);
    ``--input NAME=[1,15043,29892]``: those values, as the dtype and shape the signature records."""
    from .format.input_signature import InputSpec, make_inputs, read_input_signature
    from .runtime.input_spec import is_literal, parse_literal
    from .runtime.shapes import parse_input_spec
    try:
        recorded = {s.name: s for s in read_input_signature(nac) or []}
    except NacFormatError:
        recorded = {}
    specs, typed = [], {}
    for name, text in shaped:
        if is_literal(text):
            known = recorded.get(name)
            try:
                typed[name] = parse_literal(text, known.dtype if known is not None else None,
                                            known.shape if known is not None else None)
            except ValueError as e:
                raise CliError(f"--input {name}: {e}") from None
            continue
        try:
            spec = parse_input_spec(text)
        except ValueError as e:
            raise CliError(f"--input {name}: {e}") from None
        known = recorded.get(name)
        low, high = (known.low, known.high) if known is not None and known.dtype == spec.dtype else (None, None)
        specs.append(InputSpec(name, tuple(spec.shape), spec.dtype, "input", low, high))
    try:
        return {**make_inputs(specs, seed=seed), **typed}
    except ValueError as e:
        raise CliError(f"--input: {e}") from None


def run_inputs(nac, items, seed: int, *, default: bool = False, base_dirs=(), say=None) -> dict:
    """The named inputs of a run of ``nac`` (``nac run``, ``profile``, ``diff``, ``nac dap``):
    ``items`` (``(name, text)``: an .npy file, SHAPE[:DTYPE] or the values) as arrays with their
    companions filled (:func:`with_companions`; ``say`` names them); with ``default`` (the user
    gave no input at all), the file's input signature, seeded random."""
    say = say or _note
    if default:
        from .format.input_signature import signature_inputs
        made = signature_inputs(nac, seed=seed) or {}
        if made:      # a run on values nobody gave says which (a user reading outputs must know)
            say("no input given: " + ", ".join(f"{k} = {v.dtype}{list(v.shape)}"
                                               for k, v in list(made.items())[:4])
                + (f" and {len(made) - 4} more" if len(made) > 4 else "")
                + f" from the file's input signature, seeded random (--seed {seed}); --input NAME=... gives your own")
        return made
    inputs, shaped = split_inputs(name_unnamed(nac, items), base_dirs)
    if shaped:
        inputs.update(shaped_inputs(nac, shaped, seed))
    return with_companions(nac, inputs, say)


def _note(text: str) -> None:
    import sys
    print(f"nac: note: {text}", file=sys.stderr)


def with_companions(nac, inputs: dict, say=None) -> dict:
    """``inputs`` with the companions of a given ``input_ids`` that the file takes but the user
    left out (attention_mask, token_type_ids, position_ids) set to what transformers assumes
    then; ``say(text)`` (default: a note on stderr) names each one filled."""
    say = say or _note
    from .format.input_signature import read_input_signature
    from .runtime.input_spec import fill_companions
    try:
        dtypes = {s.name: s.dtype for s in read_input_signature(nac) or ()}
    except NacFormatError:
        dtypes = {}
    filled = fill_companions(list(nac.input_name_map.values()), inputs, dtypes)
    if filled:
        say(f"{', '.join(filled)} not given: set as transformers assumes without one (a mask of ones, "
            "type 0, positions 0..n-1)")
    return inputs


def _dtype_name(v) -> str:
    """``float16`` for a numpy array's or a torch tensor's dtype alike."""
    return str(getattr(v.dtype, "name", v.dtype)).removeprefix("torch.")


def input_hint(inputs, feeds, err, nac=None) -> str:
    """When an instruction fails on values the user supplied, the likeliest fix is the inputs:
    say which were given, with their shapes, so the one-line error says what to change; a named
    input of another dtype than the file's input signature records is named with both."""
    if "failed" not in str(err) or not (inputs or feeds):
        return ""
    recorded = {}
    if nac is not None and inputs:
        from .format.input_signature import read_input_signature
        try:
            recorded = {s.name: s.dtype for s in read_input_signature(nac) or () if s.kind == "input"}
        except NacFormatError:      # a broken signature: verify's business, not this hint's
            pass
    other = [f"{k} is {_dtype_name(v)} where the file was compiled for {recorded[k]}"
             for k, v in inputs.items() if k in recorded and hasattr(v, "dtype") and _dtype_name(v) != recorded[k]]
    if other:
        return f" ({'; '.join(other)})"

    def form(v) -> str:
        shape = getattr(v, "shape", None)
        if shape is None:
            return type(v).__name__
        return f"{'x'.join(str(d) for d in shape) or 'scalar'}:{_dtype_name(v)}"
    given = [f"{k}={form(v)}" for k, v in (inputs or {}).items()] + [form(v) for v in feeds or []]
    return f" (inputs given: {', '.join(given)}; check their shapes and dtypes against the model)"


def add_import_argument(parser) -> None:
    parser.add_argument("--import", dest="imports", action="append", metavar="FILE.py|MODULE",
                        help="import this first: the code that registers the file's custom operators "
                             "(torch.library) so they can run (repeatable; runs that code: use code you trust)")


def load_imports(refs) -> None:
    """``--import`` refs, imported in order (once each); a failure is one CliError naming the
    file and line."""
    from .compiler.command import import_operator_code
    try:
        import_operator_code(refs)
    except ValueError as e:
        raise CliError(f"--import {e}") from None
