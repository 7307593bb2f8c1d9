"""Compile Model dialog: a PyTorch model (a Python file's factory, or a Hugging Face directory) to a
``.nac``, from the Studio, then opened.

It runs ``nac compile`` itself, in a process of its own (``QProcess``; the window never waits): the
model's code is the user's and runs there, not in the window, the command line's checks and
messages are the ones a user gets, and Cancel ends that process (the file is written atomically,
so a cancelled compile leaves nothing half-written). What the command says on stderr (its notes,
its one-line error) is shown as it comes.
"""
from __future__ import annotations

import os
import re
import shlex
import time
from typing import Optional

from PySide6.QtCore import QProcess, QProcessEnvironment, Qt, QTimer, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout,
                               QHBoxLayout, QLabel, QLineEdit, QProgressBar, QPushButton, QSpinBox, QVBoxLayout,
                               QWidget)

# the command's own choices and default output (a torch-free module)
from nac_engine.compiler.command import (QUANT_CHOICES, compile_failure, default_output, is_hf_directory,
                                         model_arguments, model_sources, nac_process)
from nac_engine.compiler.tokenizer import TOKENIZER_FILES

STDERR_KEPT = 20_000          # characters of the command's stderr kept for the message
_BAR = re.compile(r"weights:\s+(\d+)%")


def compilable(path: str) -> bool:
    """Whether ``path`` is something this dialog compiles (a ``.py`` file, a Hugging Face directory)."""
    return path.endswith(".py") and os.path.isfile(path) or is_hf_directory(path)


#: A model file larger than this is not read for its function names (the field stays free text).
FACTORY_SCAN_MAX = 2 << 20


def factories(path: str) -> list[str]:
    """The top-level functions of a model file that can be called with no argument (what
    ``nac compile FILE.py:NAME`` calls), ``make_model`` first; the file is parsed, never run.
    Empty when it cannot be read or parsed (the compile will say why)."""
    import ast
    try:
        if os.path.getsize(path) > FACTORY_SCAN_MAX:
            return []
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            a = node.args
            required = len(a.posonlyargs) + len(a.args) - len(a.defaults) + \
                sum(1 for d in a.kw_defaults if d is None)
            if required == 0:
                names.append(node.name)
    return sorted(names, key=lambda n: n != "make_model")


def has_tokenizer(folder: str) -> bool:
    """A Hugging Face folder that carries its tokenizer (what ``--tokenizer`` embeds)."""
    return any(os.path.isfile(os.path.join(folder, f)) for f in TOKENIZER_FILES)


def compile_arguments(source: str, output: str, *, factory: str = "", quant: str = "none",
                      external: bool = False, seq_len: int = 0, hf_class: str = "", inputs: str = "",
                      tokenizer: bool = False) -> list[str]:
    """The ``nac compile`` arguments for these choices (also what the dialog shows as the command).
    ``inputs``: a factory that returns the model alone needs one ``SHAPE[:DTYPE]`` per forward
    argument, separated by spaces or commas."""
    hf = is_hf_directory(source)
    args = model_arguments(source if hf or factory in ("", "make_model") else f"{source}:{factory}")
    if hf:
        if seq_len > 0:
            args += ["--seq-len", str(seq_len)]
        if hf_class and hf_class != "AutoModel":
            args += ["--hf-class", hf_class]
        if tokenizer:
            args += ["--tokenizer"]
    else:
        for spec in inputs.replace(",", " ").split():
            args += ["--input", spec]
    if quant != "none":
        args += ["--quant", quant]
    if external:
        args += ["--weights", "external"]
    return ["compile", *args, "-o", output]


class CompileDialog(QDialog):
    """``compiled(path)`` once the file is written (the window opens it)."""
    compiled = Signal(str)

    def __init__(self, parent: Optional[QWidget] = None, source: str = "", remembered: Optional[dict] = None):
        super().__init__(parent)
        # source -> :meth:`options` of its last compile (the window keeps them): the model's
        # inputs, quantisation... are filled in again when it is chosen
        self.remembered = remembered or {}
        self.setWindowTitle("Compile Model")
        self.setMinimumWidth(560)
        self.process: Optional[QProcess] = None
        self._stderr = ""
        self._started = 0.0
        self.source = QLineEdit(self)
        self.source.setPlaceholderText("model.py (its make_model() returns the model and example inputs), "
                                       "or a Hugging Face model directory")
        pick_file = QPushButton("File…", self)
        pick_file.clicked.connect(self._pick_file)
        pick_dir = QPushButton("Folder…", self)
        pick_dir.clicked.connect(self._pick_dir)
        src_row = QHBoxLayout()
        src_row.addWidget(self.source, 1)
        src_row.addWidget(pick_file)
        src_row.addWidget(pick_dir)
        # the file's functions that take no argument (read with ast, never run), make_model first
        self.factory = QComboBox(self)
        self.factory.setEditable(True)
        self.factory.lineEdit().setPlaceholderText("make_model")
        self.inputs = QLineEdit(self)
        self.inputs.setPlaceholderText("a shape per input, e.g. 1x3x224x224 1x16:int64")
        self.inputs.setToolTip("Only for a factory that returns the model alone (without example inputs): "
                               "one SHAPE[:DTYPE] per forward argument, in order")
        self.seq_len = QSpinBox(self)
        self.seq_len.setRange(0, 1 << 20)
        self.seq_len.setSpecialValueText("the model's default")
        self.hf_class = QLineEdit(self)
        self.hf_class.setPlaceholderText("AutoModel (or LlamaForCausalLM, BertModel, …)")
        self.tokenizer = QCheckBox("embed it, to give text as the input in the Studio and nac generate", self)
        self.quant = QComboBox(self)
        self.quant.addItems(list(QUANT_CHOICES))
        self.weights = QComboBox(self)
        self.weights.addItem("in the .nac file", False)
        self.weights.addItem("beside it (.safetensors)", True)
        self.output = QLineEdit(self)
        self._auto_output = True         # follows the model's name until the user picks one
        self.output.textEdited.connect(lambda _t: setattr(self, "_auto_output", False))
        pick_out = QPushButton("Save As…", self)
        pick_out.clicked.connect(self._pick_output)
        self.pickers: list[QPushButton] = [pick_file, pick_dir, pick_out]
        out_row = QHBoxLayout()
        out_row.addWidget(self.output, 1)
        out_row.addWidget(pick_out)
        form = QFormLayout()
        form.addRow("Model", src_row)
        form.addRow("Factory", self.factory)
        form.addRow("Inputs", self.inputs)
        form.addRow("Tokens", self.seq_len)
        form.addRow("Model class", self.hf_class)
        form.addRow("Tokenizer", self.tokenizer)
        form.addRow("Quantisation", self.quant)
        form.addRow("Weights", self.weights)
        form.addRow("Output", out_row)
        self._form = form
        self.command = QLabel(self)            # the same compile from a terminal
        self.command.setWordWrap(True)
        self.command.setEnabled(False)
        self.command.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 0)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.status = QLabel(self)
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.buttons = QDialogButtonBox(self)
        self.compile_button = self.buttons.addButton("Compile", QDialogButtonBox.ButtonRole.AcceptRole)
        self.compile_button.setDefault(True)
        # a .nac compiled before (the second time a model.py is opened): no need to compile again
        self.open_button = self.buttons.addButton("Open Existing", QDialogButtonBox.ButtonRole.ActionRole)
        self.open_button.hide()
        self.open_button.clicked.connect(self._open_existing)
        self.close_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        self.compile_button.clicked.connect(self.start)
        self.close_button.clicked.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.command)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addWidget(self.buttons)
        self._tick = QTimer(self)
        self._tick.setInterval(500)
        self._tick.timeout.connect(self._show_running)
        self.source.textChanged.connect(self._source_changed)
        self.factory.currentTextChanged.connect(lambda _t: self._update())
        for w in (self.inputs, self.hf_class, self.output):
            w.textChanged.connect(lambda _t: self._update())
        for w in (self.quant, self.weights):
            w.currentIndexChanged.connect(lambda _i: self._update())
        self.seq_len.valueChanged.connect(lambda _v: self._update())
        self.tokenizer.toggled.connect(lambda _c: self._update())
        self.source.setText(source)
        self._source_changed(source)

    # -- choices --------------------------------------------------------------------------------
    def _pick_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Model file", self.source.text(), "Python (*.py)")
        if path:
            self.source.setText(path)

    def _pick_dir(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Hugging Face model directory", self.source.text())
        if path:
            self.source.setText(path)

    def _pick_output(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Compile to", self.output.text(), "NAC files (*.nac)")
        if path:
            self._auto_output = False
            self.output.setText(path if path.endswith(".nac") else path + ".nac")

    def _source_changed(self, text: str) -> None:
        text = text.strip()
        hf = is_hf_directory(text)
        tok = hf and has_tokenizer(text)
        for w, show in ((self.factory, not hf), (self.inputs, not hf), (self.seq_len, hf), (self.hf_class, hf),
                        (self.tokenizer, tok)):
            self._form.setRowVisible(w, show)
        self.tokenizer.setChecked(tok)
        if not hf and text.endswith(".py"):
            names = factories(text)
            self.factory.blockSignals(True)
            self.factory.clear()
            self.factory.addItems(names)
            self.factory.setCurrentText(names[0] if names else "")
            self.factory.blockSignals(False)
        if text and self._auto_output:
            self.output.setText(default_output(text))
        saved = self.remembered.get(text)
        if isinstance(saved, dict):
            self.apply_options(saved)
        self._update()

    def options(self) -> dict:
        """The choices besides the model, as the window remembers them for its next compile (the
        output only when the user picked it)."""
        out = {"factory": self.factory.currentText().strip(), "inputs": self.inputs.text().strip(),
               "seq_len": self.seq_len.value(), "hf_class": self.hf_class.text().strip(),
               "tokenizer": self.tokenizer.isChecked(), "quant": self.quant.currentText(),
               "external": bool(self.weights.currentData())}
        if not self._auto_output:
            out["output"] = self.output.text().strip()
        return out

    def apply_options(self, saved: dict) -> None:
        """Fill the fields from :meth:`options` of an earlier compile (values of the wrong kind,
        from a damaged settings file, are skipped)."""
        def get(key, kind):
            v = saved.get(key)
            return v if type(v) is kind else None        # (type, not isinstance: a bool is no int)
        setters = (("factory", str, self.factory.setCurrentText), ("inputs", str, self.inputs.setText),
                   ("seq_len", int, self.seq_len.setValue), ("hf_class", str, self.hf_class.setText),
                   ("external", bool, lambda v: self.weights.setCurrentIndex(1 if v else 0)))
        for key, kind, apply in setters:
            if get(key, kind) is not None:
                apply(get(key, kind))
        if get("tokenizer", bool) is not None and self.tokenizer.isVisibleTo(self):
            self.tokenizer.setChecked(get("tokenizer", bool))
        if get("quant", str) in QUANT_CHOICES:
            self.quant.setCurrentText(get("quant", str))
        if get("output", str):
            self._auto_output = False
            self.output.setText(get("output", str))

    def arguments(self) -> list[str]:
        return compile_arguments(self.source.text().strip(), self.output.text().strip(),
                                 factory=self.factory.currentText().strip(), quant=self.quant.currentText(),
                                 external=bool(self.weights.currentData()), seq_len=self.seq_len.value(),
                                 hf_class=self.hf_class.text().strip(), inputs=self.inputs.text(),
                                 tokenizer=self.tokenizer.isVisibleTo(self) and self.tokenizer.isChecked())

    def _problem(self) -> str:
        src, out = self.source.text().strip(), self.output.text().strip()
        if not src:
            return "Choose a model file or a Hugging Face directory."
        if not compilable(src):
            return (f"{src}: not a .py file or a directory with config.json" if os.path.exists(src)
                    else f"{src}: no such file or directory")
        if not out:
            return "Choose where the .nac goes."
        return ""

    def _update(self) -> None:
        if self.running:
            return
        problem = self._problem()
        self.compile_button.setEnabled(not problem)
        self.command.setText("" if problem else "nac " + " ".join(shlex.quote(a) for a in self.arguments()))
        out = self.output.text().strip()
        exists = not problem and os.path.isfile(out)
        text, fresh = self._existing(out) if exists else ("", False)
        self.open_button.setVisible(exists)
        self.open_button.setDefault(fresh)          # Enter opens an up-to-date file, else compiles
        self.compile_button.setDefault(not fresh)
        self._say(problem if problem and self.source.text().strip() else text)

    def _existing(self, out: str) -> tuple[str, bool]:
        """What the user should know about an output that exists, and whether nothing it was built
        from changed since."""
        name = os.path.basename(out)
        try:
            built = os.stat(out).st_mtime
            newer = [p for p in model_sources(self.source.text().strip()) if os.stat(p).st_mtime > built]
        except OSError:
            return f"{out} exists and will be replaced.", False
        if newer:
            return (f"{name} exists, but {os.path.basename(newer[0].rstrip('/'))} was saved after it: compile "
                    f"again (it is replaced)."), False
        return f"{name} exists and nothing it was built from changed since: open it, or compile to replace it.", True

    def _open_existing(self) -> None:
        out = self.output.text().strip()
        if not self.running and os.path.isfile(out):
            self.compiled.emit(out)
            self.accept()

    def _say(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #c0392b" if error else "")
        self.status.setText(text)

    # -- the compile ----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.process is not None

    def start(self) -> None:
        if self.running or self._problem():
            return
        proc = QProcess(self)
        program, *arguments = nac_process(self.arguments())
        proc.setProgram(program)
        proc.setArguments(arguments)
        env = QProcessEnvironment.systemEnvironment()
        env.insert("NAC_PROGRESS", "1")          # the weights' progress bar, whose last line is shown
        proc.setProcessEnvironment(env)
        proc.readyReadStandardError.connect(self._read_stderr)
        proc.finished.connect(self._finished)
        proc.errorOccurred.connect(self._failed_to_start)
        self._stderr = ""
        self._started = time.monotonic()
        self.process = proc
        self._set_running(True)
        proc.start()

    def cancel(self) -> None:
        """End a running compile (its process); nothing is written."""
        if self.process is not None:
            proc, self.process = self.process, None
            proc.finished.disconnect(self._finished)
            proc.finished.connect(proc.deleteLater)      # not waited for: a killed process ends at once
            proc.kill()
            self._set_running(False)
            self._say("Cancelled; nothing was written.")

    def _set_running(self, running: bool) -> None:
        for w in (self.source, self.factory, self.inputs, self.seq_len, self.hf_class, self.tokenizer, self.quant,
                  self.weights, self.output,
                  self.compile_button, self.open_button, *self.pickers):
            w.setEnabled(not running)
        self.close_button.setText("Cancel" if running else "Close")
        self.progress.setVisible(running)
        self.progress.setRange(0, 0)          # busy until the weights' bar says how far
        if running:
            self._tick.start()
            self._show_running()
        else:
            self._tick.stop()

    def _show_running(self) -> None:
        note = self._last_line()
        # the weights' bar (tqdm's "weights:  70%|███ | 2.71G/3.85G [...]"): its fraction fills the bar
        bar = _BAR.match(note)
        if bar:
            self.progress.setRange(0, 100)
            self.progress.setValue(int(bar.group(1)))
        self._say(f"Compiling… {time.monotonic() - self._started:.0f} s" + (f"\n{note}" if note else ""))

    def _read_stderr(self) -> None:
        if self.process is not None:
            text = bytes(self.process.readAllStandardError()).decode("utf-8", "replace")
            self._stderr = (self._stderr + text)[-STDERR_KEPT:]

    def _last_line(self) -> str:
        lines = [ln.strip() for ln in self._stderr.replace("\r", "\n").splitlines() if ln.strip()]
        return lines[-1].removeprefix("nac: ") if lines else ""

    def _failed_to_start(self, _error) -> None:
        if self.process is not None and self.process.state() == QProcess.ProcessState.NotRunning:
            message = self.process.errorString()
            self.process.deleteLater()
            self.process = None
            self._set_running(False)
            self._say(f"Could not run the compiler: {message}", error=True)

    def _finished(self, code: int, _status) -> None:
        proc = self.process
        if proc is None:
            return
        self._read_stderr()
        self.process = None
        proc.deleteLater()
        self._set_running(False)
        out = self.output.text().strip()
        if code == 0 and os.path.isfile(out):
            self._say(f"Compiled in {time.monotonic() - self._started:.1f} s.")
            self.compiled.emit(out)
            self.accept()
            return
        message = compile_failure(self._stderr, code)
        if "--input SHAPE" in message:      # the command's words; here it is the Inputs field
            head = message.split(": give its inputs", 1)[0]
            message = (f"{head}: give one shape per argument in the Inputs field (e.g. 1x3x32x32), "
                       f"or return (model, example_inputs) from the factory")
            self._form.setRowVisible(self.inputs, True)
            self.inputs.setFocus()
        self._say(message, error=True)

    def reject(self) -> None:
        if self.running:                 # Cancel while compiling: stop it, keep the dialog
            self.cancel()
            return
        super().reject()

    def closeEvent(self, event) -> None:
        self.cancel()
        super().closeEvent(event)

