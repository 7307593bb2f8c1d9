"""``nac compile``: argument parsing and printing; the work is in :mod:`nac_engine.compiler`.

Two sources of a model:

* ``--hf DIR_OR_CONFIG``: a Hugging Face model (``--hf-class`` picks the class: an Auto class
  such as AutoModelForCausalLM, or a concrete one such as BertModel) with trained weights when
  DIR holds them, else a ``config.json`` with seeded random weights, fed example inputs of
  ``--batch``/``--seq-len``/``--image-size``;
* ``MODEL``: ``path/to/file.py[:FACTORY]`` or ``package.module[:FACTORY]``.

The factory contract. ``FACTORY`` (default ``make_model``) is a callable that takes no
arguments and returns one of:

* ``(model, args)``: ``model`` a ``torch.nn.Module``, ``args`` one example tensor or a tuple
  (or list) of them, in the order ``forward`` takes them (a ``forward`` that takes one list is
  given ``([a, b],)``);
* ``(model, args, kwargs)``: the same plus a dict of keyword inputs to ``forward``;
* ``model`` alone: then give one ``--input SHAPE[:DTYPE]`` per ``forward`` argument
  (``--input 1x3x32x32``, ``--input 1x16:int64``; floats are seeded random, integers zero).

The example inputs fix every shape in the compiled file (no dynamic dimensions); the inputs
keep the names of ``forward``'s parameters. ``torch.manual_seed(--seed)`` runs before the
factory; the model is traced with ``torch.export`` in eval mode under ``torch.no_grad()``.
A file's own directory is importable while it loads (sibling modules work). The file is
imported and run: compile only code you trust, as you would run it.

Nothing here imports torch until the command runs.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import sys

QUANT_CHOICES = ("none", "fp16", "int8_tensor", "int8_channel", "block_fp8")
_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


def _help_description() -> str:
    """The module docstring from "Two sources of a model" up to the implementation note."""
    doc = __doc__ or ""
    start = doc.find("Two sources of a model")
    end = doc.find("Nothing here imports torch")
    return doc[start:end].strip().replace("``", "") if start >= 0 else ""


def add_parser(sub) -> None:
    s = sub.add_parser("compile", help="compile a PyTorch / Hugging Face model to .nac",
                       description=_help_description(),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("model", nargs="?", metavar="MODEL", help="FILE.py[:FACTORY] or package.module[:FACTORY]")
    src.add_argument("--hf", metavar="DIR_OR_CONFIG", help="Hugging Face model directory or config.json")
    s.add_argument("-o", "--output", help="the .nac to write (external weights go beside it; default: beside the "
                                          "model, model.py -> model.nac, a folder tiny/ -> tiny.nac)")
    g = s.add_argument_group("inputs")
    g.add_argument("--batch", type=int, default=1, help="--hf: batch size (default 1)")
    g.add_argument("--seq-len", type=int, help="--hf text/audio models: tokens, or audio samples (default: 16 "
                   "tokens, or the samples 16 frames of the model's feature extractor need)")
    g.add_argument("--image-size", type=int, help="--hf vision models: image side (default: the config's)")
    g.add_argument("--hf-class", default="AutoModel", help="--hf: transformers class (default AutoModel)")
    g.add_argument("--random-weights", action="store_true", help="--hf DIR: ignore trained weights in DIR")
    g.add_argument("--kv-cache", choices=("prefill", "decode"),
                   help="--hf causal LM: compile one generation step with a key/value cache: the prefill of "
                        "--seq-len tokens, or one decode step (cache in, updated cache out); see nac generate")
    g.add_argument("--cache-slots", type=int, default=64, metavar="N",
                   help="--kv-cache: positions the cache holds, prompt included (default 64)")
    g.add_argument("--seed", type=int, default=0, help="seed for random weights and example inputs (default 0)")
    g.add_argument("--input", action="append", metavar="SHAPE[:DTYPE]",
                   help="MODEL returning a bare module: one per input, e.g. 1x3x32x32 or 1x16:int64")
    o = s.add_argument_group("output")
    o.add_argument("--quant", choices=QUANT_CHOICES, default="none", help="weight quantisation (default none)")
    o.add_argument("--weights", choices=("internal", "external"), default="internal",
                   help="weights in the file (default) or in <base>.safetensors beside it")
    o.add_argument("--version", choices=("1.6", "1.8"), default="1.6", help="NAC version (default 1.6)")
    o.add_argument("--mmap", choices=("min-peak", "reference"), default="min-peak",
                   help="MMAP planner: ours (default) or the reference compiler's")
    o.add_argument("--lookahead", type=int, default=2, metavar="N", help="preload lookahead (default 2)")
    o.add_argument("--no-opt", action="store_true", help="skip the optimiser passes")
    o.add_argument("--tokenizer", nargs="?", const="", metavar="DIR",
                   help="embed a Hugging Face tokenizer (DIR, or the --hf directory when DIR is omitted)")
    o.add_argument("--no-debug-info", action="store_true",
                   help="do not record the source map (tick -> module path and the model's file:line) in RSRC")
    o.add_argument("--report", action="store_true", help="print passes, sizes, peak memory, quantisation error")
    o.add_argument("--json", action="store_true", help="print the report as JSON")
    o.add_argument("-v", "--verbose", action="store_true", help="print compile errors in full")
    s.set_defaults(func=cmd_compile)


# --------------------------------------------------------------------------- model sources
def _parse_input(spec: str):
    import torch
    shape_text, _, dtype = spec.partition(":")
    dtype = dtype or "float32"
    if dtype not in _DTYPES:
        raise ValueError(f"--input {spec}: dtype must be one of {', '.join(_DTYPES)}")
    try:
        shape = [int(d) for d in shape_text.lower().split("x")] if shape_text else []
    except ValueError:
        raise ValueError(f"--input {spec}: shape must look like 1x3x32x32") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"--input {spec}: negative dimension")
    dt = getattr(torch, dtype)
    if dt.is_floating_point:
        return torch.randn(shape).to(dt)
    return torch.zeros(shape, dtype=dt)


def load_factory(ref: str):
    """``FILE.py[:NAME]`` / ``package.module[:NAME]`` → the callable (default name ``make_model``)."""
    target, name = ref, "make_model"
    head, sep, tail = ref.rpartition(":")
    if sep and tail.isidentifier() and not (len(head) == 1 and head.isalpha()):   # not a Windows drive
        target, name = head, tail
    module = import_user_module(target)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{target} defines no callable {name!r} (give FILE.py:FACTORY)")
    return fn


#: Operator code imported by this process (``nac run --import``, the engine host, ``nac dap``), by
#: absolute path or module name: a second import would register its torch.library ops again,
#: which torch refuses.
_IMPORTED_OPERATOR_CODE: set[str] = set()


def import_operator_code(refs) -> None:
    """Import each ``FILE.py`` or ``package.module`` once per process: the code that registers a
    file's custom operators (torch.library), so the interpreter finds them. ValueError (one line,
    the user's file and line) when one fails."""
    for ref in refs or ():
        if not isinstance(ref, str) or not ref:
            raise ValueError(f"{ref!r} is not a file or module name")
        key = os.path.abspath(ref) if ref.endswith(".py") or os.sep in ref else ref
        if key in _IMPORTED_OPERATOR_CODE:
            continue
        try:
            import_user_module(ref, f"_nac_operators_{len(_IMPORTED_OPERATOR_CODE)}")
        except ValueError as e:
            raise ValueError(str(e) if str(e).startswith(ref) else f"{ref}: {e}") from None
        _IMPORTED_OPERATOR_CODE.add(key)


def import_user_module(target: str, module_name: str = "_nac_compile_model"):
    """``FILE.py`` (its directory importable while it loads) or ``package.module``, imported: the
    user's model code, or the code that registers their torch.library ops (``nac run --import``).
    Its errors are one line naming the user's file and line."""
    if target.endswith(".py") or os.sep in target or os.path.exists(target):
        if not os.path.isfile(target):
            raise ValueError(f"{target}: no such file")
        spec = importlib.util.spec_from_file_location(module_name, os.path.abspath(target))
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        try:
            with user_code(target):
                spec.loader.exec_module(module)
        finally:
            sys.path.pop(0)
    else:
        with user_code(target):
            module = importlib.import_module(target)
    return module


@contextlib.contextmanager
def user_code(what: str):
    """Errors raised by the user's own code (a syntax error in the model file, an exception in
    the factory) become a one-line ValueError naming the user's file and line."""
    try:
        yield
    except SyntaxError as e:
        where = f"{e.filename or what}:{e.lineno}" if e.lineno else (e.filename or what)
        raise ValueError(f"{where}: syntax error: {e.msg}; fix the model file") from None
    except ImportError as e:
        raise ValueError(f"{what}{_user_line(e)}: {e} (is the module installed / on PYTHONPATH?)") from None
    except Exception as e:   # noqa: BLE001 - anything the user's code raises is reported, not crashed on
        raise ValueError(f"{what}{_user_line(e)}: {type(e).__name__}: {e}") from None


def _user_line(e: BaseException) -> str:
    """`` (at FILE:LINE)`` for the innermost traceback frame outside this package, if any."""
    import traceback
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not os.path.abspath(f.filename).startswith(here) and "importlib" not in f.filename
              and not f.filename.startswith("<frozen")]
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def check_output_path(path: str) -> None:
    """Refuse an output that cannot be written before spending minutes compiling it."""
    full = os.path.abspath(path)
    directory = os.path.dirname(full)
    if os.path.isdir(full):
        raise ValueError(f"-o {path}: is a directory; give a file name such as {os.path.join(path, 'model.nac')}")
    if not os.path.isdir(directory):
        raise ValueError(f"-o {path}: the directory {directory} does not exist; create it first")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"-o {path}: cannot write in {directory} (permission denied)")


def model_from_factory(ref: str, inputs):
    import torch
    factory = load_factory(ref)
    with user_code(ref):
        made = factory()
    kwargs = None
    if isinstance(made, torch.nn.Module):
        if not inputs:
            raise ValueError(f"{ref} returned a bare module{_forward_takes(made)}: give its inputs with "
                             f"--input SHAPE[:DTYPE], one per argument (e.g. --input 1x3x32x32), or return "
                             f"(model, example_inputs) from the factory")
        model, args = made, tuple(_parse_input(s) for s in inputs)
    elif isinstance(made, tuple) and len(made) in (2, 3) and isinstance(made[0], torch.nn.Module):
        model, args = made[0], made[1]
        # a list is the positional inputs, as a tuple is ("return model, [x]" meant forward(x))
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        kwargs = made[2] if len(made) == 3 else None
    else:
        raise ValueError(f"{ref} must return a module, (module, args) or (module, args, kwargs), "
                         f"not {type(made).__name__}")
    return model, args, kwargs


def _forward_takes(model) -> str:
    """`` whose forward takes (x, mask)``: what a user must give --input for (empty when the
    signature cannot be read)."""
    import inspect
    try:
        params = [p.name for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return ""
    return f" whose forward takes ({', '.join(params)})"


def hf_model(path: str, options: dict, seed: int, stream: bool = True):
    """``(model, args, kwargs, checkpoint, notes)`` of a Hugging Face directory as ``nac compile
    --hf`` builds it from ``options`` (``build_recipe.HF_OPTIONS``: class, random weights, batch,
    lengths, key/value-cache step); ``nac diff --eager DIR`` builds the same with a file's record."""
    from . import hf
    hf_class = options.get("class") or "AutoModel"
    kv = options.get("kv_cache")
    if kv and hf_class == "AutoModel":
        hf_class = "AutoModelForCausalLM"      # generation needs the LM head
    batch = options.get("batch") or 1
    m = hf.build(path, model_class=hf_class, random_weights=bool(options.get("random_weights")), seed=seed,
                 batch=batch, seq_len=options.get("seq_len"), image_size=options.get("image_size"), stream=stream)
    model, kwargs, checkpoint, notes = m.model, m.kwargs, m.checkpoint, m.notes
    if kv:
        from .kv_cache import KvStep, step_inputs
        if batch != 1:
            raise ValueError("--kv-cache compiles batch 1")
        model = KvStep(m.model, options.get("cache_slots") or 64)
        kwargs = step_inputs(model, kv, options.get("seq_len") or 32)
        notes = [n for n in notes if n != hf.CACHE_NOTE]
        if checkpoint is not None:
            checkpoint.wrapper = "model"           # KvStep.model holds the checkpoint's model
    return model, (), kwargs, checkpoint, notes


def _custom_operators(nac) -> list[str]:
    """``namespace::op`` of each custom operator (torch.library) the compiled file calls."""
    from ..isa.optable import qualified_name
    from ..runtime.kernels import needs_operator_code
    names = {nac.instruction_name(i) for i in nac.instructions if i.a >= 10}
    return sorted({qualified_name(n) for n in names if needs_operator_code(n)})


def _tokenizer_dir(args) -> str | None:
    if args.tokenizer is None:
        return None
    if args.tokenizer:
        return args.tokenizer
    if not args.hf:
        raise ValueError("--tokenizer without DIR needs --hf DIR")
    return args.hf if os.path.isdir(args.hf) else os.path.dirname(os.path.abspath(args.hf))


# --------------------------------------------------------------------------- the command
def _fail(message: str) -> int:
    # Printed here rather than raised as cli.CliError: under ``python -m nac_engine.cli`` that class
    # lives in __main__, a different module object than the one this package would import.
    text = " ".join(message[:2400].split())
    print("nac: error: " + (text if len(text) <= 600 else text[:599] + "…"), file=sys.stderr)
    return 2          # the user's mistake or a refused model (the exit-code rule in `nac --help`)


@contextlib.contextmanager
def weight_progress(nac):
    """A progress callback for writing external weights: a bar (parameters, bytes/s) on a
    terminal, nothing when stderr is piped (unless ``NAC_PROGRESS=1``: a front end that shows the
    bar's last line, as the Studio's Compile Model dialog does) or the weights are internal."""
    if nac.header.weights_internal or not (sys.stderr.isatty() or os.environ.get("NAC_PROGRESS") == "1"):
        yield None
        return
    try:
        from tqdm import tqdm
    except ImportError:           # tqdm comes with transformers (the [hf] extra); without it, no bar
        yield None
        return
    total = sum(p.meta.stored_nbytes for p in nac.params.values() if p.meta is not None)
    with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="weights", file=sys.stderr,
              leave=False, dynamic_ncols=True) as bar:
        def progress(name: str, nbytes: int) -> None:
            bar.set_postfix_str(name[-40:], refresh=False)
            bar.update(nbytes)
        yield progress


def model_file(ref: str) -> str:
    """The file of a ``model.py[:FACTORY]`` reference."""
    return ref[:ref.index(".py:") + 3] if ".py:" in ref else ref


def is_hf_directory(path: str) -> bool:
    """A Hugging Face model's folder (what ``--hf`` takes): a directory with a ``config.json``."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json"))


def model_sources(source: str) -> list[str]:
    """The files a compile of ``source`` is built from, as far as a staleness check can tell: every
    file of a Hugging Face folder, or the ``model.py`` and the other ``.py`` files beside it (its
    sibling modules, which it may import). Code imported from elsewhere is not among them."""
    if is_hf_directory(source):
        return [os.path.join(source, n) for n in os.listdir(source)]
    path = os.path.abspath(model_file(source))
    here = os.path.dirname(path)
    siblings = [n for n in os.listdir(here) if n.endswith(".py") and n != os.path.basename(path)]
    return [path] + [os.path.join(here, n) for n in siblings]


def model_arguments(source: str) -> list[str]:
    """How ``nac compile`` is told the model: ``--hf FOLDER`` for a Hugging Face model's folder,
    else the ``model.py[:FACTORY]`` itself."""
    return ["--hf", source] if is_hf_directory(source) else [source]


def nac_process(arguments) -> list[str]:
    """The argv of ``nac ARGUMENTS`` in a process of its own, with this interpreter (how the
    Studio's Compile dialog and ``nac dap`` compile: the model's code never runs in theirs)."""
    return [sys.executable, "-m", "nac_engine.cli", *arguments]


def compile_failure(stderr: str, returncode: int) -> str:
    """What a failed ``nac compile`` process said: its last one-line error (file:line first),
    else how it ended."""
    errors = [ln[len("nac: error: "):] for ln in stderr.splitlines() if ln.startswith("nac: error: ")]
    return errors[-1] if errors else f"nac compile ended with exit code {returncode}: {stderr.strip()[-400:]}"


def default_output(source: str) -> str:
    """Where a compile writes without ``-o``: ``model.py[:FACTORY]`` -> ``model.nac`` beside it; a
    Hugging Face folder ``tiny/`` (or its ``tiny/config.json``) -> ``tiny.nac`` beside the folder."""
    source = model_file(source)
    if os.path.basename(source) == "config.json":
        source = os.path.dirname(source) or "."
    source = source.rstrip("/\\") or source
    base, ext = os.path.splitext(source)
    return (base if ext == ".py" else os.path.abspath(source)) + ".nac"


def cmd_compile(args) -> int:
    from .errors import CompileError
    try:
        if not args.output:
            args.output = default_output(args.hf or args.model)
        check_output_path(args.output)
        tokenizer = _tokenizer_dir(args)
        if args.lookahead < 0:
            raise ValueError("--lookahead must be >= 0")
        if args.hf:
            hf_options = {"class": args.hf_class, "random_weights": args.random_weights, "batch": args.batch,
                          "seq_len": args.seq_len, "image_size": args.image_size, "kv_cache": args.kv_cache,
                          "cache_slots": args.cache_slots if args.kv_cache else None}
            model, margs, mkwargs, checkpoint, notes = hf_model(args.hf, hf_options, args.seed)
            for note in notes:                         # what --hf changed, e.g. use_cache off
                print(f"nac: note: {note}", file=sys.stderr)
        else:
            import torch
            torch.manual_seed(args.seed)
            model, margs, mkwargs = model_from_factory(args.model, args.input)
            checkpoint = None
        from ..format.build_recipe import set_build_recipe
        from .external import write_compiled
        from .pipeline import compile_model
        from .report import format_report
        res = compile_model(model, margs, mkwargs, optimize=not args.no_opt,
                            quantization=None if args.quant == "none" else args.quant, weights=args.weights,
                            version=args.version, mmap=args.mmap, preload_lookahead=args.lookahead,
                            tokenizer=tokenizer, debug_info=not args.no_debug_info, checkpoint=checkpoint)
        # kept like the input signature (with --no-debug-info too): nac diff --eager needs it
        # to build the same weights
        set_build_recipe(res.nac, seed=args.seed, hf=hf_options if args.hf else None)
        with weight_progress(res.nac) as progress:
            written = write_compiled(res.nac, args.output, progress)
        custom = _custom_operators(res.nac)
        if custom:
            print(f"nac: note: the model calls custom operator(s) {', '.join(custom)}: running the file needs "
                  "the code that registers them (nac run --import FILE.py)", file=sys.stderr)
    except CompileError as e:
        if args.verbose:
            print(str(e), file=sys.stderr)
        first = e.message.strip().splitlines()[0] if e.message.strip() else "compile failed"
        return _fail((f"{e.source} — " if e.source else "") + first)      # where first, then what to change
    except (ValueError, OSError, ImportError) as e:
        return _fail(str(e))
    rep = res.report
    if args.hf:
        rep.warnings[:0] = notes
    rep.files = list(written)
    rep.file_bytes = os.path.getsize(args.output)
    if args.json:
        print(json.dumps(rep.to_dict(), indent=2, default=str))
        return 0
    print(f"{args.output}: {rep.file_bytes:,} bytes, {rep.instructions} instructions, {rep.params} parameters"
          + (f" (+ {os.path.basename(written[0])})" if len(written) > 1 else ""))
    if args.report:
        print(format_report(rep))
    return 0
