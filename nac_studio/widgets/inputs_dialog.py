"""Inputs dialog: how each ``<INPUT>`` of the file is filled before a run.

One row per value a run needs, in instruction order — user inputs, buffers and lifted
constants, by name — with a choice of random (seeded), zeros, ones, a ``.npy`` file, the value
the file stores (lifted constants that carry one), or, when the file embeds a tokenizer, text
tokenised right here (the ids are shown as you type). Shapes and dtypes start from the file's
input signature when it has one (``nac compile`` records it); a file without one (the reference
compiler's) asks. The debug controller remembers the choices per file.
"""
from __future__ import annotations

from typing import Optional

from nac_engine.errors import NacFormatError

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFileDialog, QGridLayout, QHBoxLayout, QLabel,
                               QLineEdit, QScrollArea, QSpinBox, QToolButton, QVBoxLayout, QWidget)

from ..debug_session import INPUT_MODES, DebugSession, InputChoice, InputSlotInfo, make_value

DTYPES = ("float32", "float16", "float64", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
_MODE_TITLES = {"random": "Random (seeded)", "zeros": "Zeros", "ones": "Ones", "npy": ".npy file",
                "text": "Text (tokenised)", "values": "Typed values", "stored": "Stored in the file"}


def parse_shape(text: str) -> Optional[list]:
    """``1x128``, ``1, 128``, ``[1,128]`` → [1, 128]; ``""`` → None; anything else ValueError."""
    t = text.strip().strip("[]()")
    if not t:
        return None
    parts = [p for p in t.replace("x", ",").replace("×", ",").replace(" ", ",").split(",") if p]
    dims = [int(p) for p in parts]
    if any(d < 0 for d in dims) or len(dims) > 16:
        raise ValueError(f"not a shape: {text!r}")
    return dims


class InputRow:
    """The widgets of one slot."""

    def __init__(self, dlg: "InputsDialog", slot: InputSlotInfo, choice: InputChoice, has_tokenizer: bool):
        self.slot = slot
        self.dlg = dlg
        self.mode = QComboBox(dlg)
        for m in INPUT_MODES:
            if m == "stored" and not slot.has_stored or m == "text" and not has_tokenizer:
                continue
            self.mode.addItem(_MODE_TITLES[m], m)
        self.shape = QLineEdit(dlg)
        self.shape.setPlaceholderText("shape, e.g. 1x128")
        if choice.shape is not None:
            self.shape.setText("x".join(map(str, choice.shape)))
        self.dtype = QComboBox(dlg)
        self.dtype.addItems(list(DTYPES))
        self.dtype.setCurrentText(choice.dtype or slot.dtype or "float32")
        self.seed = QSpinBox(dlg)
        self.seed.setRange(0, 2**31 - 1)
        self.seed.setValue(choice.seed)
        self.seed.setPrefix("seed ")
        self.path = QLineEdit(choice.path, dlg)
        self.path.setPlaceholderText("file.npy")
        self.browse = QToolButton(dlg)
        self.browse.setText("…")
        self.browse.clicked.connect(lambda _c=False: self._browse())
        self.text = QLineEdit(choice.text, dlg)
        self.text.setPlaceholderText("text to tokenise")
        self.values = QLineEdit(choice.values, dlg)
        self.values.setPlaceholderText("values, e.g. [1, 15043, 29892] or [[0.5, 1], [2, 3]]")
        self.values.setToolTip("The values themselves, as a list (nested for more dimensions); a flat list "
                               "of as many values as the input has takes its shape")
        self.ids = QLabel("", dlg)
        self.ids.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.ids.setWordWrap(True)
        self.text.textChanged.connect(lambda _t: self._tokenise())
        i = self.mode.findData(choice.mode)
        self.mode.setCurrentIndex(i if i >= 0 else 0)
        self.mode.currentIndexChanged.connect(lambda _i: self._mode_changed())
        self._mode_changed()

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.dlg, f"Values for {self.slot.label}", self.path.text(),
                                              "NumPy (*.npy)")
        if path:
            self.path.setText(path)

    def _mode_changed(self) -> None:
        m = self.mode.currentData()
        for w in (self.shape, self.dtype):
            w.setVisible(m in ("random", "zeros", "ones"))
        self.seed.setVisible(m == "random")
        self.path.setVisible(m == "npy")
        self.browse.setVisible(m == "npy")
        self.text.setVisible(m == "text")
        self.values.setVisible(m == "values")
        self.ids.setVisible(m == "text")
        if m == "text":
            self._tokenise()

    def _tokenise(self) -> None:
        tok = self.dlg.session.tokenizer
        if tok is None:
            self.ids.setText("")
            return
        from nac_engine.compiler.tokenizer import encode_text
        try:
            ids = encode_text(tok, self.text.text())
        except NacFormatError as e:
            self.ids.setText(e.reason)
            return
        shown = ", ".join(map(str, ids[:64])) + (" …" if len(ids) > 64 else "")
        fixed = self.slot.shape[1] if self.slot.shape is not None and len(self.slot.shape) == 2 else None
        note = f" → padded/cut to {fixed}" if fixed is not None and fixed != len(ids) else ""
        self.ids.setText(f"{len(ids)} ids: [{shown}]{note}")

    def choice(self) -> InputChoice:
        m = self.mode.currentData()
        return InputChoice(mode=m, shape=parse_shape(self.shape.text()), dtype=self.dtype.currentText(),
                           seed=self.seed.value(), path=self.path.text().strip(), text=self.text.text(),
                           values=self.values.text())


class InputsDialog(QDialog):
    def __init__(self, session: DebugSession, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.session = session
        self.setWindowTitle("Inputs")
        self.setObjectName("inputsDialog")
        has_tok = session.tokenizer is not None
        grid = QGridLayout()
        grid.setColumnStretch(2, 1)
        for col, head in enumerate(("Input", "Fill with", "Value")):
            h = QLabel(f"<b>{head}</b>", self)
            grid.addWidget(h, 0, col)
        self.rows: list[InputRow] = []
        for r, slot in enumerate(session.slots, start=1):
            row = InputRow(self, slot, session.choice(slot), has_tok)
            self.rows.append(row)
            what = f"{slot.label}\n{slot.kind} · tick {slot.tick}"
            if slot.shape is not None:
                what += f" · {'×'.join(map(str, slot.shape)) or 'scalar'} {slot.dtype or ''}"
            grid.addWidget(QLabel(what, self), r, 0)
            grid.addWidget(row.mode, r, 1, Qt.AlignmentFlag.AlignTop)
            value = QHBoxLayout()
            for w in (row.shape, row.dtype, row.seed, row.path, row.browse, row.text, row.values):
                value.addWidget(w)
            box = QVBoxLayout()
            box.addLayout(value)
            box.addWidget(row.ids)
            grid.addLayout(box, r, 2)
        grid.setRowStretch(len(self.rows) + 1, 1)      # the rows stay together at the top
        inner = QWidget(self)
        inner.setLayout(grid)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        note = QLabel(
            "The file records its inputs' shapes and dtypes (its input signature)." if any(
                s.shape is not None for s in session.slots) else
            "This file does not record its inputs' shapes (e.g. the reference compiler's files): "
            "give a shape or a .npy file for each.", self)
        note.setWordWrap(True)
        if not session.slots:
            note.setText("This file reads no inputs: nothing to choose.")
        self.error = QLabel("", self)
        self.error.setStyleSheet("color: #d0443c")
        self.error.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Run")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(note)
        lay.addWidget(scroll, 1)
        lay.addWidget(self.error)
        lay.addWidget(buttons)
        self.resize(760, min(560, 160 + 64 * max(1, len(self.rows))))

    def choices(self) -> dict[int, InputChoice]:
        return {row.slot.position: row.choice() for row in self.rows}

    def accept(self) -> None:
        """Only when every value can be built (a bad shape or unreadable .npy stays here)."""
        try:
            tok = self.session.tokenizer
            for row in self.rows:
                make_value(row.slot, row.choice(), tok)
        except Exception as exc:    # ValueError, OSError from np.load: say which input and why
            self.error.setText(str(exc))
            return
        super().accept()
