"""Stepping through a generation in the Studio (issue 25 §1): the prefill runs in the engine host,
then the decode-step document is debugged one run per token — stopped before tick 0, F10 steps
inside it, Next Token (Ctrl+Shift+F10) finishes it and starts the next — and the tokens are the
ones ``nac_engine.generate`` (what ``nac generate`` runs) chooses."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt

from nac_engine.cli import main as nac
from nac_engine.generate import generate
from nac_studio.generation_commands import is_decode_step, prefill_beside
from tests.studio.test_debugger_gui import press

VOCAB = 96


# a prefill/decode pair compiled and generations stepped through the host (7 s apiece): the heavy tier
pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    import transformers
    root = tmp_path_factory.mktemp("gen")
    config = transformers.AutoConfig.for_model(
        model_type="llama", hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, vocab_size=VOCAB, max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).eval().save_pretrained(root / "hf")
    files = {}
    for kind in ("prefill", "decode"):
        files[kind] = str(root / f"tiny_{kind}.nac")
        assert nac(["compile", "--hf", str(root / "hf"), "--kv-cache", kind, "--seq-len", "4", "--cache-slots", "16",
                    "-o", files[kind]]) == 0
    return files


def test_a_generation_is_stepped_one_decode_run_per_token(window, qtbot, pair):
    prompt, n = [5, 17, 42], 4
    want = generate(pair["prefill"], pair["decode"], prompt, n).tokens
    qdoc = window.open_and_wait(pair["decode"])
    assert is_decode_step(qdoc.nac) and prefill_beside(pair["decode"]) == pair["prefill"]
    assert window.commands.get("debug.generate").is_enabled() and not window.commands.get("debug.nextToken").is_enabled()
    gen = window.generation
    gen.start(qdoc, pair["prefill"], prompt, n)
    s = qdoc.doc.debug
    qtbot.waitUntil(lambda: gen.state == "stepping" and s.active and not s.running, timeout=60000)
    assert s.tick == -1 and len(gen.stepper.tokens) == 1
    assert window.commands.get("debug.nextToken").is_enabled()
    # F10 inside the first token's decode run
    for expected in (0, 1, 2):
        press(qtbot, window, Qt.Key.Key_F10)
        qtbot.waitUntil(lambda t=expected: s.tick == t and not s.running, timeout=30000)
    # Next Token: this run to its end, then the next one stopped before tick 0
    for made in range(2, n + 1):
        press(qtbot, window, Qt.Key.Key_F10, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        qtbot.waitUntil(lambda m=made: len(gen.stepper.tokens) == m and not s.running
                        and (gen.state == "done" or s.tick == -1), timeout=60000)
    assert gen.state == "done" and gen.stepper.tokens == want
    assert str(want[-1]) in gen.message and not window.commands.get("debug.nextToken").is_enabled()
    assert s.feed_override is None
    # the Debug Console keeps the transcript: the prompt, each token (with the runner-up), each run
    lines = list(s.console)
    assert lines[0].startswith(f"── generation: {n} token(s) after the prompt [5, 17, 42] (3 ids), prefill tiny_prefill")
    chosen = [ln for ln in lines if ln.startswith("token ")]
    assert [int(ln.split(": id ")[1].split(",")[0]) for ln in chosen] == want
    ref = generate(pair["prefill"], pair["decode"], prompt, n)
    second = int(np.argsort(ref.logits[0])[-2])
    assert f" (runner-up id {second}, logit " in chosen[0]
    assert sum(ln.startswith("── decode run for token ") for ln in lines) == n - 1
    assert "── new run ──" not in lines and lines[-1] == f"generated: {gen.text()}"
    assert window.views["debug_console"].lines() == lines


def test_generate_is_offered_only_for_a_decode_step_file(window, qtbot, pair):
    window.open_and_wait(pair["prefill"])
    assert not window.commands.get("debug.generate").is_enabled()
    assert prefill_beside(pair["prefill"]) is None


def test_a_prefill_whose_cache_does_not_fit_says_so(window, qtbot, pair, tmp_path):
    other = str(tmp_path / "tiny_prefill8.nac")
    assert nac(["compile", "--hf", str(Path(pair["prefill"]).parent / "hf"), "--kv-cache", "prefill", "--seq-len", "4",
                "--cache-slots", "8", "-o", other]) == 0
    qdoc = window.open_and_wait(pair["decode"])
    gen = window.generation
    gen.start(qdoc, other, [5, 17], 2)
    qtbot.waitUntil(lambda: gen.state == "failed", timeout=60000)
    assert "(8 slots against 16): compile both with the same --cache-slots" in gen.message
    assert "8 slots against 16" in window.statusBar().currentMessage()
