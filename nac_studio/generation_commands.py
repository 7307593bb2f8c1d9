"""Step through a text generation: the prefill runs once, then the decode-step file is debugged one
run per token (issue 25 §1). The decode-step document is the one being debugged: every view
follows its runs as they follow any run, F10/F5/Step Back work inside each token's run, and
**Next Token** (Ctrl+Shift+F10) finishes the current run, takes the argmax of its logits, and
starts the next run on the token and the updated cache, stopped before tick 0. The Debug Console
keeps the transcript: the prompt, each token as it is chosen (its text, id and logit beside the
runner-up's: a near-tie is where a quantised or compiled model may pick another word), each
token's decode run, and the generated text.

The bookkeeping (prompt padding, positions, which token is chosen, when to stop) is the engine's
``nac_engine.generate.Stepper``, the same code ``nac generate`` runs, so the Studio generates the
tokens the command line does. The prefill's run and the outputs of each decode run are the
engine host's requests (``nac/run``, ``nac/outputs``); the Studio holds the cache between runs
(a few MB for a 1B model at 64 slots) only to hand it to the next one.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np
from PySide6.QtCore import QObject, Signal

from .debug_session import FINISHED

#: The decode-step file's inputs (``nac compile --kv-cache decode``).
DECODE_INPUTS = {"input_ids", "cache_position", "past_keys", "past_values"}


def is_decode_step(nac) -> bool:
    from nac_engine.format.input_signature import read_input_signature
    try:
        names = {s.name for s in read_input_signature(nac) or ()}
    except Exception:          # noqa: BLE001 - a broken signature is verify's to report
        return False
    return DECODE_INPUTS <= names


def prefill_beside(path: str) -> Optional[str]:
    """The prefill file next to a decode-step file, by the names ``nac compile`` users give them."""
    folder, name = os.path.split(path)
    for a, b in (("decode", "prefill"), ("Decode", "Prefill"), ("DECODE", "PREFILL"), ("dec", "pre")):
        if a in name:
            guess = os.path.join(folder, name.replace(a, b))
            if os.path.isfile(guess):
                return guess
    return None


class GenerationController(QObject):
    """One generation at a time, on the active decode-step document."""
    changed = Signal()

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.qdoc = None
        self.stepper = None
        self.prefill_path = ""
        self.state = "idle"            # idle | prefill | stepping | done | failed
        self.message = ""
        self._task = None

    # -- starting ---------------------------------------------------------------------------
    def start(self, qdoc, prefill_path: str, prompt_ids: list, tokens: int) -> None:
        """Run the prefill in the engine host, then stop before tick 0 of the first decode run."""
        from nac_engine.format.reader import read
        from nac_engine.generate import Stepper
        self.stop()
        with read(prefill_path, strict=False) as prefill:
            stepper = Stepper(prefill, qdoc.nac, prompt_ids, tokens)      # GenerationError: the files do not pair
        self.qdoc, self.stepper, self.prefill_path = qdoc, stepper, prefill_path
        stepper.on_token = lambda step, token, logits, st=stepper: self._print_token(st, step, token, logits)
        self._print(f"── generation: {tokens} token(s) after the prompt {self._words(stepper.prompt)} "
                    f"({len(stepper.prompt)} ids), prefill {os.path.basename(prefill_path)} ──")
        self._set("prefill", f"Generation: running the prefill ({os.path.basename(prefill_path)})…")
        task = qdoc.host.request("nac/run", {"path": prefill_path, "inputs": stepper.prefill_inputs()},
                                 title="Prefill", supersede="generation")
        task.finished.connect(lambda body, s=stepper: self._prefilled(s, body))
        task.failed.connect(lambda exc, s=stepper: self._failed(s, exc))
        self._task = task

    def _prefilled(self, stepper, body: dict) -> None:
        from nac_engine.generate import GenerationError
        if stepper is not self.stepper:
            return
        try:
            inputs = stepper.after_prefill(body["outputs"])
        except GenerationError as exc:          # the prefill's cache does not fit the decode step
            self._failed(stepper, exc)
            return
        self._feed(inputs)

    def _feed(self, inputs: Optional[dict]) -> None:
        """The next decode run on ``inputs``, stopped before tick 0; or the end of the generation."""
        if self.qdoc not in self.window.docs:          # the file was closed meanwhile
            self.qdoc = None
            self.stop()
            return
        s = self.qdoc.doc.debug
        if inputs is None:
            s.feed_override = None
            self._print(f"generated: {self.text()}")
            self._set("done", f"Generation done: {self.text()}")
            return
        if s.active:
            self.window.debug.stop_session(self.qdoc)
        s.feed_override = inputs
        self._print(f"── decode run for token {len(self.stepper.tokens) + 1} of {self.stepper.wanted} ──")
        self.window.debug.start_stopped(self.qdoc)
        n, wanted = len(self.stepper.tokens), self.stepper.wanted
        self._set("stepping", f"Generation: token {n}/{wanted} so far: {self.text()} — the decode run for the "
                              f"next one is ready (F10 steps through it; Ctrl+Shift+F10: next token)")

    # -- stepping ---------------------------------------------------------------------------
    def can_step(self) -> bool:
        s = self.qdoc.doc.debug if self.qdoc is not None and self.qdoc in self.window.docs else None
        return self.state == "stepping" and s is not None and not s.running

    def next_token(self) -> None:
        """Finish this token's run (Continue to the end, breakpoints ignored), then start the next."""
        if not self.can_step():
            return
        s = self.qdoc.doc.debug
        if s.state == FINISHED:
            self._collect()
            return
        stepper = self.stepper
        future = self.window.debug.launch_on(self.qdoc, "run_to", len(s) - 1, False)
        if future is None:
            return

        def done(qdoc, st=stepper):
            if st is not self.stepper:              # a new generation (or none) since: not ours to finish
                self.window.debug.actionDone.disconnect(done)
                return
            if qdoc is not self.qdoc:               # another document's action
                return
            self.window.debug.actionDone.disconnect(done)
            if self.qdoc.doc.debug.state == FINISHED:
                self._collect()
            else:
                self._set("stepping", f"Generation: the decode run stopped at tick {self.qdoc.doc.debug.tick} "
                                      "before its end")
        self.window.debug.actionDone.connect(done)

    def _collect(self) -> None:
        stepper = self.stepper
        task = self.qdoc.host.request("nac/outputs", {"path": self.qdoc.doc.path}, title="Decode outputs",
                                      supersede="generation")
        task.finished.connect(lambda body, st=stepper: st is self.stepper and self._feed(st.after_step(body["outputs"])))
        task.failed.connect(lambda exc, st=stepper: self._failed(st, exc))
        self._task = task

    def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if self.qdoc is not None and self.qdoc.doc.debug is not None:
            self.qdoc.doc.debug.feed_override = None
        self.stepper = None
        self._set("idle", "")

    # -- what it says -----------------------------------------------------------------------
    def text(self) -> str:
        """The generated tokens, as text when a file embeds a tokenizer, else as ids."""
        return self._words(self.stepper.tokens) if self.stepper is not None else ""

    def _failed(self, stepper, exc) -> None:
        if stepper is self.stepper and type(exc).__name__ != "Cancelled":
            self._print(f"generation stopped: {exc}")
            self._set("failed", f"Generation stopped: {exc}")

    # -- the transcript in the Debug Console -------------------------------------------------
    def _print(self, text: str) -> None:
        s = self.qdoc.doc.debug if self.qdoc is not None else None
        if s is not None:
            s.console_print(text)
            s.notify()

    def _words(self, ids: list) -> str:
        """Token ids as the embedded tokenizer reads them (repr), else the ids themselves."""
        tok = self.qdoc.doc.debug.tokenizer if self.qdoc is not None else None
        if tok is not None:
            try:
                return repr(tok.decode(list(ids)))
            except Exception:     # noqa: BLE001 - ids it cannot decode: show them
                pass
        return "[" + ", ".join(map(str, ids)) + "]"

    def _print_token(self, stepper, step: int, token: int, logits) -> None:
        if stepper is not self.stepper:
            return
        last = np.asarray(logits, np.float32).ravel()
        has_text = self.qdoc.doc.debug.tokenizer is not None

        def named(i: int) -> str:
            return f"{self._words([i])} id {i}" if has_text else f"id {i}"
        line = f"token {step + 1}: {named(token)}, logit {float(last[token]):.4g}"
        if last.size > 1:
            rest = last.copy()
            rest[token] = -np.inf
            second = int(np.argmax(rest))
            line += f" (runner-up {named(second)}, logit {float(last[second]):.4g})"
        self._print(line)

    def _set(self, state: str, message: str) -> None:
        self.state, self.message = state, message
        if message:
            self.window.show_message(message, 20000)
        self.changed.emit()
        self.window.commands.refresh()

    # -- the command ------------------------------------------------------------------------
    def start_dialog(self) -> None:
        """Ask for the prefill file, the prompt and how many tokens, then start."""
        from PySide6.QtWidgets import QFileDialog, QInputDialog
        qdoc = self.window.active
        if qdoc is None or not _active_is_decode_step(self.window):
            self.window.show_message("Generate: open a decode-step file (nac compile --kv-cache decode)")
            return
        prefill = prefill_beside(qdoc.doc.path or "")
        if prefill is None:
            prefill, _ = QFileDialog.getOpenFileName(self.window, "The prefill file for this decode step",
                                                     os.path.dirname(qdoc.doc.path or ""), "NAC (*.nac)")
            if not prefill:
                return
        tok = qdoc.doc.debug.tokenizer
        label = "Prompt (text):" if tok is not None else "Prompt (token ids, comma-separated):"
        prompt, ok = QInputDialog.getText(self.window, "Generate token by token", label)
        if not ok or not prompt.strip():
            return
        tokens, ok = QInputDialog.getInt(self.window, "Generate token by token", "New tokens:", 8, 1, 4096)
        if not ok:
            return
        try:
            if tok is not None:
                from nac_engine.compiler.tokenizer import encode_text
                ids = encode_text(tok, prompt)
            else:
                ids = [int(x) for x in prompt.replace(",", " ").split()]
            self.start(qdoc, prefill, ids, tokens)
        except ValueError as exc:       # GenerationError, bad ids
            self.window.show_message(f"Generate: {exc}", 15000)


def _active_is_decode_step(window) -> bool:
    """Whether the active document is a decode-step file (asked at every command refresh: the
    answer is kept on the document)."""
    q = window.active
    if q is None:
        return False
    known = getattr(q, "_decode_step", None)
    if known is None or known[0] is not q.nac:
        known = (q.nac, getattr(q.doc, "peer", None) is None and is_decode_step(q.nac))
        q._decode_step = known
    return known[1]


def register_generation_commands(window) -> GenerationController:
    ctl = GenerationController(window)
    c = window.commands
    c.add("debug.generate", "Generate Token by Token…", ctl.start_dialog, menu="Debug", group="g",
          enabled=lambda: _active_is_decode_step(window),
          tip="A decode-step file: run the prefill, then debug one decode run per generated token")
    c.add("debug.nextToken", "Next Token", ctl.next_token, shortcut="Ctrl+Shift+F10", menu="Debug", group="g",
          order=1, enabled=ctl.can_step,
          tip="Finish this token's decode run and start the next one on its token and cache")
    return ctl
