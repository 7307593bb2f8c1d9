"""TVMR in the Studio (issue 14), through the real MainWindow's command registry: the binary peers'
text form in the IR Text pane with selection <-> line sync (TVMR), and the TVMR Machine pane's
Step / Step Back / Run / Reset moving the document's selection and tick, its register table equal to
an independent TvmrMachine's registers at the same tick, host-only ops listed, a long Run in a
background task."""
from __future__ import annotations

import numpy as np
import pytest

from nac_engine.peers import open_peer, tvmr
from nac_engine.peers.tvmr.asm import assemble
from nac_studio.peer_views import covered_text
from nac_studio.model.tvmr_session import value_summary
from tests.corpus_paths import CORPUS
from tests.studio.conftest import wait_idle

PEERS = CORPUS / "peers"
CLASSIFIER = PEERS / "tvmr" / "synthesized" / "ant_classifier.tvmr"
needs_corpus = pytest.mark.skipif(not CLASSIFIER.is_file(), reason="shared corpus absent")

LONG = """
.requires
    neuro 0x0005
.registers
    H0: i32[4]
    H1: i32[4]
    H2: i32[1]
.program
    load_input H0
    copy_reg H1, H0
    neuro.chem_read H2, 1
    loop 600
    add H1, H1, H0
    shift H1, H1, 1
    end_loop
    store_output H1
    halt
"""


def _instr_line(ir, k):
    peer = ir.qdoc.doc.peer
    return ir.text.splitlines()[peer.line_of_offset(peer.instructions[k].offset) - 1].strip()


@needs_corpus
def test_tvmr_text_form_follows_selection_and_selects_back(window, qtbot):
    qdoc = window.open_and_wait(CLASSIFIER)
    peer, ir = qdoc.doc.peer, window.views["ir_text"]
    assert covered_text(ir) is None and ir.mode == "peer_text"
    assert ir.text == peer.disassemble()
    assert ir.tvmr_highlighter.document() is ir.editor.document()
    # a click on an instruction's bytes (hex/structure) -> its line; the tick follows the selection
    window.select(qdoc.doc.selection_at(peer.instructions[3].offset + 5))
    assert qdoc.tick == 3
    line = peer.line_of_offset(peer.instructions[3].offset)
    assert ir.current_lines() == [line] and _instr_line(ir, 3) == "ternary_matmul H2, C1, H1"
    assert ir.editor.textCursor().blockNumber() + 1 == line
    # a click on a line -> that instruction's 8 bytes selected, tick moved
    from PySide6.QtGui import QTextCursor
    block = ir.editor.document().findBlockByNumber(peer.line_of_offset(peer.instructions[7].offset) - 1)
    ir.editor.setTextCursor(QTextCursor(block))
    span = qdoc.doc.span_of(qdoc.selection)
    assert (span.offset, span.length) == (peer.instructions[7].offset, 8) and qdoc.tick == 7
    assert window.hex_view.area.highlights()
    # a line that is no instruction (a register definition) selects nothing new
    ir.editor.setTextCursor(QTextCursor(ir.editor.document().findBlockByNumber(4)))
    assert qdoc.doc.span_of(qdoc.selection).offset == peer.instructions[7].offset


@pytest.mark.skipif(not PEERS.is_dir(), reason="shared corpus absent")
@pytest.mark.parametrize("pattern", ["ane/*.hwx", "neff/*.neff"])
def test_binary_peer_text_form_is_shown_uncoloured(window, qtbot, pattern):
    path = sorted(PEERS.glob(pattern))[0]
    qdoc = window.open_and_wait(path)
    ir = window.views["ir_text"]
    expected = qdoc.doc.peer.disassemble()
    assert expected and ir.mode == "peer_text" and ir.text == expected[:len(ir.text)]
    assert ir.tvmr_highlighter.document() is None and ir.highlighter.document() is None
    assert covered_text(window.views["tvmr_machine"]) is None
    assert not window.commands.get("tvmr.step").is_enabled()      # not a TVMR file: nothing to step


def _fresh(path, n):
    m = open_peer(str(path)).machine(seed=0)
    for _ in range(n):
        m.step()
    return m


@needs_corpus
def test_step_step_back_run_reset_through_commands(window, qtbot):
    qdoc = window.open_and_wait(CLASSIFIER)
    peer, view, c = qdoc.doc.peer, window.views["tvmr_machine"], window.commands
    assert "Not available" in (covered_text(window.views["disassembly"]) or "")
    # the NAC debugger keeps its keys; the TVMR commands have none and the NAC ones are off here
    assert all(c.get(i).shortcut is None for i in ("tvmr.step", "tvmr.stepBack", "tvmr.run", "tvmr.reset"))
    assert not c.get("debug.stepOver").is_enabled()
    assert c.get("tvmr.step").is_enabled() and not c.get("tvmr.stepBack").is_enabled()
    for _ in range(3):
        c.run("tvmr.step")
    assert qdoc.tick == 3 and view.session.position == 3
    span = qdoc.doc.span_of(qdoc.selection)
    assert (span.offset, span.length) == (peer.instructions[3].offset, 8)
    ref = _fresh(CLASSIFIER, 3).registers_at(3)
    rows = {r[0]: r for r in view.register_rows()}
    assert rows["H1"][1:3] == ("i32", "[24]") and rows["C0"][2] == "[24, 32]"
    assert rows["H1"][3] == value_summary(ref["H1"]) and rows["H0"][3] == value_summary(ref["H0"])
    # and those values are what the program computes: H1 = relu(sat_i32(C0 @ H0)) with the seeded weights
    m = view.session.machine
    expect = np.maximum(0, np.clip(m.cold[0].effective.reshape(24, 32) @ m.input.astype(np.int64), -2**31, 2**31 - 1))
    np.testing.assert_array_equal(ref["H1"], expect)
    assert np.count_nonzero(expect) and "nonzero 0/24" not in rows["H1"][3]
    assert rows["H2"][3] == value_summary(np.zeros(24))                     # not yet written
    ir = window.views["ir_text"]
    assert ir.exec_line == peer.line_of_offset(peer.instructions[3].offset)
    # step back: the table shows tick 2 again, the machine is not rerun
    c.run("tvmr.stepBack")
    assert qdoc.tick == 2 and view.session.position == 2 and len(view.session.steps) == 3
    assert {r[0]: r for r in view.register_rows()}["H1"][3] == value_summary(_fresh(CLASSIFIER, 2).registers_at(2)["H1"])
    c.run("tvmr.step")                                                       # replayed from the record
    assert qdoc.tick == 3 and len(view.session.steps) == 3
    # run to HALT (short: on the UI thread); output equal to the engine's own run
    assert c.run("tvmr.run") is None
    ref = _fresh(CLASSIFIER, 10_000)
    assert view.session.at_end and not c.get("tvmr.step").is_enabled()
    assert qdoc.tick == len(peer.instructions) - 1                           # the HALT, last executed
    assert value_summary(ref.output) in view.status.text()
    rows = {r[0]: r for r in view.register_rows()}
    assert rows["H4"][3] == value_summary(ref.registers()["H4"])
    c.run("tvmr.reset")
    assert view.session.position == 0 and qdoc.tick == 0 and "next: [0] LOAD_INPUT" in view.status.text()


def test_long_run_goes_to_a_worker_and_host_ops_are_listed(window, qtbot, tmp_path):
    path = tmp_path / "long.tvmr"
    path.write_bytes(assemble(LONG))
    qdoc = window.open_and_wait(path)
    view, c = window.views["tvmr_machine"], window.commands
    view.session.machine.input[:] = [1, -2, 3, -4]
    task = c.run("tvmr.run")
    assert task is not None                                  # past the inline budget: a TaskRunner task
    assert not c.get("tvmr.step").is_enabled() or not view.running
    qtbot.waitUntil(lambda: not view.running, timeout=20000)
    wait_idle(qtbot, window, 5000)
    ref = tvmr.interp.run(tvmr.decode(assemble(LONG)), inputs=[1, -2, 3, -4])
    assert view.session.at_end and view.session.position == len(ref.steps) > 1200
    np.testing.assert_array_equal(view.session.machine.output, ref.output)
    assert "[2] neuro.CHEM_READ" in view.host.text() and view.host.isVisible()
    assert qdoc.tick == len(qdoc.doc.peer.instructions) - 1


def test_cancelled_run_keeps_its_steps_and_the_pane_steps_on(window, qtbot, tmp_path):
    path = tmp_path / "endless.tvmr"
    path.write_bytes(assemble(LONG.replace("loop 600", "loop 60000")))
    qdoc = window.open_and_wait(path)
    view, c = window.views["tvmr_machine"], window.commands
    task = c.run("tvmr.run")
    assert task is not None and view.running and not c.get("tvmr.reset").is_enabled()
    qtbot.waitUntil(lambda: view.session.position > 2000, timeout=20000)
    task.cancel()
    qtbot.waitUntil(lambda: not view.running, timeout=20000)
    s = view.session
    assert not s.at_end and s.position == len(s.steps) and s.position < 3 * 60000
    assert c.get("tvmr.step").is_enabled() and qdoc.tick == s.exec_index
    before = s.position
    c.run("tvmr.step")
    assert s.position == before + 1


@needs_corpus
def test_seed_gives_new_synthetic_weights_and_resets(window, qtbot):
    from nac_engine.peers.tvmr.interp import synthetic_weights
    window.open_and_wait(CLASSIFIER)
    view, c = window.views["tvmr_machine"], window.commands
    c.run("tvmr.step")
    c0 = {r[0]: r for r in view.register_rows()}["C0"][3]
    view.seed_box.setValue(7)
    assert view.session.seed == 7 and view.session.position == 0
    pol, mag = synthetic_weights([24, 32], 7 * 64 + 0)           # the engine's per-register seeding
    expect = "weights " + value_summary(pol.astype(np.int64) * mag.astype(np.int64))
    rows = {r[0]: r for r in view.register_rows()}
    assert rows["C0"][3] == expect != c0
