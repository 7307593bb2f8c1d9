"""File ▸ Compile Model… and opening a model: a model.py or a Hugging Face folder given where a .nac
belongs (Open, a drop, the command line) opens the Compile Model dialog on it; Compile runs
`nac compile` in a process of its own, says its error in the dialog, can be cancelled (nothing is
written), and opens the file it wrote."""
from __future__ import annotations

import os
import time

import pytest

from PySide6.QtCore import Qt

from nac_engine.format.input_signature import read_input_signature
from nac_studio.widgets.compile_dialog import CompileDialog, compile_arguments, default_output
from tests.studio.test_debugger_gui import press, wait_stopped

MODEL = '''import time
import torch


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def make_model():
    return Small(), (torch.randn(2, 8),)


def slow_model():
    time.sleep(120)
    return make_model()
'''


def _dialog(window) -> CompileDialog:
    found = [w for w in window.findChildren(CompileDialog) if w.isVisible()]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.heavy       # one or two `nac compile` processes: 9-14 s
def test_opening_a_model_file_compiles_it_and_opens_the_result(window, qtbot, tmp_path):
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    assert window.open_path(str(model)) is None
    dlg = _dialog(window)
    assert dlg.source.text() == str(model) and dlg.output.text() == str(tmp_path / "model.nac")
    assert dlg.command.text() == f"nac compile {model} -o {tmp_path / 'model.nac'}"
    assert not window.docs and "compile it" in window.statusBar().currentMessage()
    dlg.quant.setCurrentText("fp16")
    with qtbot.waitSignal(window.documentOpened, timeout=180000) as opened:
        qtbot.mouseClick(dlg.compile_button, Qt.MouseButton.LeftButton)
        assert dlg.running and not dlg.compile_button.isEnabled() and dlg.close_button.text() == "Cancel"
    qdoc = opened.args[0]
    assert qdoc.doc.path == str(tmp_path / "model.nac") and qdoc.nac.header.quant_method != 0
    # a model compiled here runs like any other
    press(qtbot, window, Qt.Key.Key_F5)
    wait_stopped(qtbot, window)
    assert qdoc.doc.debug.state == "finished", qdoc.doc.debug.describe()
    # compiled again over the open file (Ctrl+Shift+B, now without quantisation): the tab shows
    # the new file, not the version read before
    window.commands.run("file.compile")
    dlg = _dialog(window)
    dlg.source.setText(str(model))
    assert dlg.output.text() == str(tmp_path / "model.nac")
    assert dlg.quant.currentText() == "fp16"            # remembered from the last compile of this model
    dlg.quant.setCurrentText("none")
    with qtbot.waitSignal(window.documentOpened, timeout=180000) as opened:
        qtbot.mouseClick(dlg.compile_button, Qt.MouseButton.LeftButton)
    assert len(window.docs) == 1 and window.active is opened.args[0] is not qdoc
    assert window.active.nac.header.quant_method == 0


def test_the_compilers_error_is_said_in_the_dialog_and_cancel_writes_nothing(window, qtbot, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\ndef make_model(:\n    pass\n")
    dlg = window.compile_dialog(str(bad))
    qtbot.mouseClick(dlg.compile_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dlg.running, timeout=120000)
    assert dlg.isVisible() and f"{bad}:3: syntax error" in dlg.status.text() and not window.docs
    assert "Traceback" not in dlg.status.text() and dlg.compile_button.isEnabled()
    # a compile that takes long: Cancel ends its process at once and writes nothing
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    dlg.source.setText(str(model))
    assert [dlg.factory.itemText(i) for i in range(dlg.factory.count())] == ["make_model", "slow_model"]
    dlg.factory.setCurrentText("slow_model")
    out = tmp_path / "slow.nac"
    dlg.output.setText(str(out))
    assert dlg.command.text().startswith(f"nac compile {model}:slow_model -o ")
    qtbot.mouseClick(dlg.compile_button, Qt.MouseButton.LeftButton)
    proc = dlg.process
    began = time.monotonic()
    qtbot.waitUntil(lambda: time.monotonic() - began > 1.0 and dlg.status.text().startswith("Compiling… "),
                    timeout=10000)                                      # well under way (its import done or not)
    assert dlg.running
    pid = proc.processId()
    t0 = time.monotonic()
    qtbot.mouseClick(dlg.close_button, Qt.MouseButton.LeftButton)      # "Cancel" while it runs
    assert not dlg.running and dlg.isVisible() and "Cancelled" in dlg.status.text()

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as f:          # a zombie until Qt reaps it: ended all the same
            return f.read().split(")")[-1].split()[0] == "Z"
    qtbot.waitUntil(gone, timeout=5000)
    assert time.monotonic() - t0 < 5 and not out.exists() and not window.docs
    # Close then closes the dialog
    qtbot.mouseClick(dlg.close_button, Qt.MouseButton.LeftButton)
    assert not dlg.isVisible()


def test_a_hugging_face_folder_opens_the_dialog_with_its_options(window, qtbot, tmp_path):
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    window.open_path(str(folder))
    dlg = _dialog(window)
    form = dlg._form
    assert form.isRowVisible(dlg.seq_len) and form.isRowVisible(dlg.hf_class) and not form.isRowVisible(dlg.factory)
    assert dlg.output.text() == str(tmp_path / "tiny-llama.nac")
    dlg.seq_len.setValue(32)
    dlg.hf_class.setText("LlamaForCausalLM")
    dlg.weights.setCurrentIndex(1)
    dlg.quant.setCurrentText("int8_channel")
    assert dlg.arguments() == ["compile", "--hf", str(folder), "--seq-len", "32", "--hf-class", "LlamaForCausalLM",
                               "--quant", "int8_channel", "--weights", "external", "-o", str(tmp_path / "tiny-llama.nac")]
    assert not form.isRowVisible(dlg.tokenizer)              # the folder has no tokenizer to embed
    (folder / "tokenizer.json").write_text("{}")
    dlg.source.setText(str(folder) + "/")                     # looked at again
    assert form.isRowVisible(dlg.tokenizer) and dlg.tokenizer.isChecked()   # on: text inputs in the Studio
    assert "--tokenizer" in dlg.arguments()
    dlg.tokenizer.setChecked(False)
    assert "--tokenizer" not in dlg.arguments()
    # an output the user typed is kept when the model changes; one that followed the model follows it
    dlg.output.setText(str(tmp_path / "mine.nac"))
    dlg.output.textEdited.emit(dlg.output.text())
    dlg.source.setText(str(folder))
    assert dlg.output.text() == str(tmp_path / "mine.nac")
    dlg.reject()


def test_the_factory_is_picked_from_the_files_functions_without_running_it(qapp, tmp_path):
    from nac_studio.widgets.compile_dialog import factories
    src = tmp_path / "net.py"
    src.write_text("import torch\n\ndef helper(x):\n    return x\n\ndef _private():\n    pass\n\n"
                   "def build(width=8, *, depth=2):\n    return torch.nn.Linear(width, 2), (torch.randn(1, width),)\n\n"
                   "raise SystemExit('never run')\n")
    assert factories(str(src)) == ["build"]
    dlg = CompileDialog(None, str(src))
    assert dlg.factory.currentText() == "build" and dlg.arguments()[1] == f"{src}:build"
    (tmp_path / "broken.py").write_text("def make_model(:\n")
    assert factories(str(tmp_path / "broken.py")) == []
    dlg.deleteLater()


def test_what_the_dialog_runs():
    assert default_output("/a/b/model.py") == "/a/b/model.nac"
    assert default_output("/a/b/tiny/") == "/a/b/tiny.nac"
    assert compile_arguments("/a/m.py", "/o.nac", factory="make_model") == ["compile", "/a/m.py", "-o", "/o.nac"]
    assert compile_arguments("/a/m.py", "/o.nac", factory="big", quant="fp16", external=True) == \
        ["compile", "/a/m.py:big", "--quant", "fp16", "--weights", "external", "-o", "/o.nac"]
    assert compile_arguments("/a/m.py", "/o.nac", inputs="1x3x8x8, 1x16:int64") == \
        ["compile", "/a/m.py", "--input", "1x3x8x8", "--input", "1x16:int64", "-o", "/o.nac"]


@pytest.mark.heavy       # one or two `nac compile` processes: 9-14 s
def test_a_factory_that_returns_the_model_alone_is_given_its_inputs(window, qtbot, tmp_path):
    bare = tmp_path / "bare.py"
    bare.write_text("import torch\n\ndef make_model():\n    return torch.nn.Linear(4, 2)\n")
    dlg = window.compile_dialog(str(bare))
    qtbot.mouseClick(dlg.compile_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dlg.running, timeout=120000)
    text = dlg.status.text()
    assert "returned a bare module whose forward takes (input)" in text and not window.docs
    assert "give one shape per argument in the Inputs field" in text and "--input" not in text
    dlg.inputs.setText("3x4")
    with qtbot.waitSignal(window.documentOpened, timeout=180000) as opened:
        qtbot.mouseClick(dlg.compile_button, Qt.MouseButton.LeftButton)
    assert [s.shape for s in read_input_signature(opened.args[0].nac)] == [(3, 4)]


def test_the_weights_bar_of_the_compiler_fills_the_dialogs(qapp, tmp_path):
    """nac compile's progress bar (on its stderr, NAC_PROGRESS=1) is shown as its last line and its
    fraction fills the dialog's bar, which is busy until then."""
    (tmp_path / "m.py").write_text("")
    dlg = CompileDialog(None, str(tmp_path / "m.py"))
    dlg._set_running(True)
    assert dlg.progress.maximum() == 0                       # busy: no fraction known yet
    dlg._stderr = "nac: note: x\rweights:  70%|####  | 2.71G/3.85G [00:07<00:03, 409MB/s]"
    dlg._show_running()
    assert (dlg.progress.maximum(), dlg.progress.value()) == (100, 70)
    assert dlg.status.text().endswith("weights:  70%|####  | 2.71G/3.85G [00:07<00:03, 409MB/s]")
    dlg._set_running(False)
    dlg.deleteLater()


def test_a_model_compiled_before_is_opened_without_compiling_it_again(window, qtbot, tmp_path):
    """The second time a model.py is opened, its model.nac is there: when nothing it was built from
    changed since, Enter opens it (Open Existing is the default button); after the model or a module
    beside it was saved, compiling again is the default and the dialog says which file changed."""
    from nac_engine.cli import main
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    assert main(["compile", str(model)]) == 0
    past = time.time() - 60
    os.utime(model, (past, past))
    window.open_path(str(model))
    dlg = _dialog(window)
    assert dlg.open_button.isVisible() and dlg.open_button.isDefault() and not dlg.compile_button.isDefault()
    assert "model.nac exists and nothing it was built from changed since" in dlg.status.text()
    with qtbot.waitSignal(window.documentOpened, timeout=30000) as opened:
        qtbot.keyClick(dlg, Qt.Key.Key_Return)
    assert opened.args[0].doc.path == str(tmp_path / "model.nac")
    assert not [w for w in window.findChildren(CompileDialog) if w.isVisible()]
    window.close_document(opened.args[0])
    (tmp_path / "layers.py").write_text("# a module the model imports, saved since\n")
    window.open_path(str(model))
    dlg = _dialog(window)
    assert dlg.open_button.isVisible() and dlg.compile_button.isDefault() and not dlg.open_button.isDefault()
    assert "model.nac exists, but layers.py was saved after it: compile again" in dlg.status.text()
    dlg.reject()


@pytest.mark.heavy       # one or two `nac compile` processes: 9-14 s
def test_the_dialog_remembers_each_models_options_for_its_next_compile(window, qtbot, tmp_path):
    """Edit, compile, debug, again: Compile Model (Ctrl+Shift+B) comes back with the last model and
    the inputs, quantisation and weights chosen for it, so the loop is one key press."""
    bare = tmp_path / "bare.py"
    bare.write_text("import torch\n\ndef make_model():\n    return torch.nn.Linear(4, 2)\n")
    dlg = window.compile_dialog(str(bare))
    dlg.inputs.setText("3x4")
    dlg.quant.setCurrentText("fp16")
    dlg.weights.setCurrentIndex(1)
    with qtbot.waitSignal(window.documentOpened, timeout=180000):
        qtbot.mouseClick(dlg.compile_button, Qt.MouseButton.LeftButton)
    bare.write_text(bare.read_text() + "# edited\n")
    os.utime(bare, (time.time() + 5, time.time() + 5))      # saved after the compile
    window.commands.run("file.compile")
    dlg = _dialog(window)
    assert dlg.source.text() == str(bare) and dlg.inputs.text() == "3x4"
    assert dlg.quant.currentText() == "fp16" and dlg.weights.currentData() is True
    assert dlg.compile_button.isDefault() and "bare.py was saved after it" in dlg.status.text()
    # after another model was chosen, choosing this one again brings its options back
    dlg.source.setText(str(tmp_path / "other.py"))
    dlg.source.setText(str(bare))
    assert dlg.inputs.text() == "3x4" and dlg.quant.currentText() == "fp16"
    dlg.reject()
