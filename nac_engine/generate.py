"""Greedy text generation from a prefill file and a decode-step file (``nac compile --kv-cache``).

``generate(prefill, decode, prompt_ids, tokens, on_token=None) -> Generation`` runs the prompt
through the prefill (its ``input_ids`` are ``[1, T]``: a shorter prompt is right-padded, which a
causal model never attends to, and the rest of a longer one goes through decode steps), then
one decode step per new token, each taking the argmax of the last logits and feeding the cache
back. ``on_token(step, token_id, logits)`` is called as each token is chosen (``nac generate``
prints the text as it grows). The cache's slots bound prompt plus generated tokens.

``nac generate PREFILL.nac DECODE.nac --prompt TEXT --tokens N`` uses the tokenizer embedded in
either file (``nac compile --tokenizer``); ``--ids 1,2,3`` gives token ids directly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np


@dataclass
class Generation:
    prompt: list
    tokens: list = field(default_factory=list)        # generated ids, in order
    logits: list = field(default_factory=list)        # each step's last-position logits (float32 [vocab])


class GenerationError(ValueError):
    pass


def _inputs_of(nac) -> dict:
    from .format.input_signature import read_input_signature
    sig = read_input_signature(nac) or []
    return {s.name: s for s in sig}


def _check_pair(prefill, decode) -> tuple[int, tuple]:
    """(prompt length T of the prefill, the decode step's cache shape) after checking that the
    two files fit together (the prefill's cache is checked against it when the prefill has run:
    the file does not record its outputs' shapes)."""
    pre, dec = _inputs_of(prefill), _inputs_of(decode)
    if set(pre) != {"input_ids"} or not {"input_ids", "cache_position", "past_keys", "past_values"} <= set(dec):
        raise GenerationError("these are not a prefill and a decode-step file (nac compile --kv-cache prefill|decode): "
                              f"their inputs are {sorted(pre)} and {sorted(dec)}")
    return int(pre["input_ids"].shape[-1]), tuple(int(n) for n in dec["past_keys"].shape)


class Stepper:
    """A generation one run at a time, for a front end that runs each file itself (the Studio's
    debugger steps through every decode run). ``generate`` is this with a plain Session per run.

    ``Stepper(prefill, decode, prompt_ids, tokens, eos=None)``; then
    ``prefill_inputs()`` → run the prefill on them → ``after_prefill(outputs)`` → the first
    decode step's inputs (or None when nothing is left to generate) → run the decode file →
    ``after_step(outputs)`` → the next step's inputs, or None when done. ``tokens`` grows as
    each token is chosen (the argmax of the last logits), ``logits`` beside it.
    """

    def __init__(self, prefill, decode, prompt_ids, tokens: int, eos: Optional[int] = None):
        self.t, self.cache_shape = _check_pair(prefill, decode)
        self.slots = self.cache_shape[3]
        self.prompt = [int(i) for i in prompt_ids]
        if not self.prompt:
            raise GenerationError("the prompt is empty")
        if len(self.prompt) + tokens > self.slots:
            raise GenerationError(f"{len(self.prompt)} prompt + {tokens} new tokens exceed the cache's "
                                  f"{self.slots} slots (compile with a larger --cache-slots)")
        self.wanted = tokens
        self.eos = eos
        self.out = Generation(self.prompt)
        self.position = 0
        self._pending = self.prompt[self.t:]          # the rest of a long prompt, one decode step each
        self.on_token: Optional[Callable[[int, int, np.ndarray], None]] = None

    @property
    def tokens(self) -> list:
        return self.out.tokens

    def prefill_inputs(self) -> dict:
        head = self.prompt[:self.t]
        ids = np.zeros((1, self.t), np.int64)
        ids[0, :len(head)] = head
        return {"input_ids": ids}

    def after_prefill(self, outputs) -> Optional[dict]:
        logits, keys, values = outputs
        got = tuple(np.shape(keys))
        if got != self.cache_shape:
            raise GenerationError(
                f"the prefill's key/value cache is {'x'.join(map(str, got))} but the decode step takes "
                f"{'x'.join(map(str, self.cache_shape))}"
                + (f" ({got[3]} slots against {self.slots}): compile both with the same --cache-slots"
                   if len(got) == 5 and got[:3] + got[4:] == self.cache_shape[:3] + self.cache_shape[4:] else
                   ": they are not from the same model"))
        head = min(len(self.prompt), self.t)
        self.position = head
        return self._next(np.asarray(logits)[0, head - 1], keys, values)

    def after_step(self, outputs) -> Optional[dict]:
        logits, keys, values = outputs
        self.position += 1
        return self._next(np.asarray(logits)[0, -1], keys, values)

    def _next(self, last: np.ndarray, keys, values) -> Optional[dict]:
        if self._pending:
            token = self._pending.pop(0)
        else:
            if len(self.out.tokens) >= self.wanted:
                return None
            token = int(np.argmax(last))
            self.out.tokens.append(token)
            self.out.logits.append(np.asarray(last, np.float32))
            if self.on_token is not None:
                self.on_token(len(self.out.tokens) - 1, token, last)
            if (self.eos is not None and token == self.eos) or len(self.out.tokens) >= self.wanted:
                return None
        return {"input_ids": np.array([[token]], np.int64), "cache_position": np.array([self.position], np.int64),
                "past_keys": keys, "past_values": values}


def generate(prefill, decode, prompt_ids, tokens: int,
             on_token: Optional[Callable[[int, int, np.ndarray], None]] = None,
             eos: Optional[int] = None) -> Generation:
    """Greedy generation (module docstring). ``prefill``/``decode``: NacFiles or paths."""
    from .format import read
    from .runtime.session import Session, can_hold, weight_bytes
    pre = prefill if not isinstance(prefill, (str, bytes)) and hasattr(prefill, "instructions") else read(prefill)
    dec = decode if not isinstance(decode, (str, bytes)) and hasattr(decode, "instructions") else read(decode)
    stepper = Stepper(pre, dec, prompt_ids, tokens, eos)
    stepper.on_token = on_token
    inputs = stepper.after_prefill(Session(pre, inputs=stepper.prefill_inputs()).run())
    previous = None
    while inputs is not None:
        session = Session(dec, inputs=inputs)
        if previous is not None:
            session.share_loaded(previous)        # prepared calls (and held weights) carry over
        elif stepper.wanted - len(stepper.tokens) > 1 and not session.holds_weights \
                and can_hold(weight_bytes(dec)):
            # the decode file runs once per token: its weights are held across the steps when
            # they fit (as transformers' generate holds the model), not read again per token
            session.holds_weights = True
        outputs = session.run()
        previous = session
        inputs = stepper.after_step(outputs)
    return stepper.out


def cmd_generate(args) -> int:
    import sys
    from .cli_error import CliError
    from .format import read
    from .errors import NacFormatError
    try:
        pre, dec = read(args.prefill), read(args.decode)
    except (OSError, NacFormatError) as e:
        raise CliError(str(e)) from None
    tok = None
    if args.ids:
        try:
            ids = [int(x) for x in args.ids.replace(",", " ").split()]
        except ValueError:
            raise CliError(f"--ids {args.ids!r}: give token ids, e.g. 1,15043,29892") from None
    else:
        from .compiler.tokenizer import encode_text, load_tokenizer
        tok = _folder_tokenizer(args.tokenizer) if args.tokenizer else load_tokenizer(pre) or load_tokenizer(dec)
        if tok is None:
            raise CliError("neither file embeds a tokenizer (nac compile --tokenizer DIR): give the model's "
                           "folder with --tokenizer DIR, or token ids with --ids")
        ids = encode_text(tok, args.prompt)
    shown = ""

    def show(step: int, token: int, _logits) -> None:
        nonlocal shown
        if tok is None:
            sys.stdout.write(("" if step == 0 else " ") + str(token))
        else:
            text = tok.decode(out_ids + [token])
            sys.stdout.write(text[len(shown):])
            shown = text
            out_ids.append(token)
        sys.stdout.flush()

    out_ids: list = []
    if tok is not None and args.echo:
        sys.stdout.write(args.prompt)
    try:
        generate(pre, dec, ids, args.tokens, show, eos=args.eos)
    except GenerationError as e:
        raise CliError(str(e)) from None
    sys.stdout.write("\n")
    return 0


def _folder_tokenizer(directory: str):
    """The tokenizer whose files are in ``directory`` (a Hugging Face model's folder), read and
    checked as ``nac compile --tokenizer`` embeds them."""
    from .cli_error import CliError
    from .compiler.tokenizer import embed_tokenizer, load_tokenizer
    from .format.model import NacFile
    holder = NacFile()
    try:
        embed_tokenizer(holder, directory)
    except (OSError, ValueError) as e:
        raise CliError(f"--tokenizer {directory}: {e}") from None
    return load_tokenizer(holder)


def add_parser(sub) -> None:
    s = sub.add_parser("generate", help="greedy text generation with a prefill and a decode-step file",
                       description=__doc__.split("\n\n")[0])
    s.add_argument("prefill", metavar="PREFILL.nac")
    s.add_argument("decode", metavar="DECODE.nac")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt", help="text, encoded with the tokenizer embedded in the files (or --tokenizer's)")
    g.add_argument("--ids", help="token ids instead of text (comma- or space-separated)")
    s.add_argument("--tokens", type=int, default=16, help="tokens to generate (default 16)")
    s.add_argument("--eos", type=int, help="stop after this token id")
    s.add_argument("--echo", action="store_true", help="print the prompt before the generated text")
    s.add_argument("--tokenizer", metavar="DIR", help="the tokenizer of this folder (a Hugging Face model's) for "
                   "--prompt and the text printed, when the files embed none")
    s.set_defaults(func=cmd_generate)


__all__ = ["generate", "Generation", "GenerationError", "Stepper"]
