"""Layering rules the code must keep."""
import pkgutil
import subprocess
import sys
from pathlib import Path

import nac_engine


def test_engine_never_imports_qt():
    modules = [m.name for m in pkgutil.walk_packages(nac_engine.__path__, "nac_engine.")]
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('PySide6', 'PyQt5', 'PyQt6', 'shiboken6'))\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(nac_engine.__file__).resolve().parents[1])
    assert out.stdout.strip() == ""


def test_the_studio_model_never_imports_qt():
    """nac_studio/model/ is the Studio's Qt-free half (document, simulation state, graph model and
    layout, MMAP timeline, ...): the folder says which code is Qt and which is not."""
    import nac_studio.model
    modules = [m.name for m in pkgutil.walk_packages(nac_studio.model.__path__, "nac_studio.model.")]
    assert len(modules) >= 17
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('PySide6', 'PyQt5', 'PyQt6', 'shiboken6'))\n"
            "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(nac_studio.model.__file__).resolve().parents[2])
    assert out.stdout.strip() == ""


def test_codec_import_does_not_load_torch():
    code = "import sys, nac_engine, nac_engine.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_studio_input_slots_do_not_load_torch():
    """Opening a file asks for its input slots on the UI thread: that must not import torch (an
    import there waits for a worker's torch import to finish: seconds of frozen UI)."""
    code = ("import sys; from nac_engine import read; from nac_studio.debug_session import input_slots; "
            f"input_slots(read({str(Path(__file__).resolve().parents[1] / 'nac_studio/demos/demo_bert_tiny.nac')!r}));"
            " print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_main_window_declares_no_fixed_command():
    """Commands are declared beside their subject (window_commands, debug_commands,
    simulation_commands, ...), not in MainWindow: main_window.py adds only the recent files'
    entries, whose ids are made at run time."""
    import ast
    import nac_studio.main_window as mw
    tree = ast.parse(Path(mw.__file__).read_text())
    fixed = [node.lineno for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add"
             and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
             and "." in node.args[0].value]
    assert fixed == [], f"commands declared in main_window.py at lines {fixed}"


def test_panes_never_import_each_other():
    """A pane (a module of nac_studio/views defining a class with an ``object_name``: what a dock
    shows) never imports another pane: they meet in the Document. A view's own helper modules
    (large_tensor for the inspector, peer_text for the IR Text pane) define no pane and may be."""
    import ast
    views = Path(nac_engine.__file__).resolve().parents[1] / "nac_studio" / "views"

    def is_pane(tree) -> bool:
        return any(isinstance(c, ast.ClassDef) and any(
            isinstance(s, ast.Assign) and any(getattr(t, "id", "") == "object_name" for t in s.targets)
            for s in c.body) for c in tree.body)
    trees = {p.stem: ast.parse(p.read_text()) for p in views.glob("*.py") if p.stem != "__init__"}
    panes = {name for name, tree in trees.items() if is_pane(tree)}
    assert {"watches", "debug_console", "source", "breakpoints"} <= panes
    crossing = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                targets = [node.module] if node.module else [a.name for a in node.names]
                crossing += [(name, t) for t in targets if t in panes and t != name]
    assert not crossing, crossing


def test_a_value_reads_as_one_line():
    import numpy as np

    from nac_studio.model.value_text import format_value
    assert format_value(np.array([1, 12, 16, 64])) == "[1, 12, 16, 64]"          # shape(x)
    assert format_value(0.1234567891) == "0.1234568"
    assert format_value(np.arange(100, dtype=np.int64)).count("...") == 1
    assert format_value(np.array([0.5, 1.25], np.float32)) == "[0.5  1.25]"
    assert format_value(list(range(20))).endswith("… (20 values)]")
