"""The ``nac-studio`` entry point: arguments, default demo, and the --screenshot smoke test."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nac_studio.app import demo_model, parse_args

REPO = Path(__file__).resolve().parents[2]


def test_arguments():
    a = parse_args(["x.nac", "y.nac", "--screenshot", "out.png", "--select", "12"])
    assert a.files == ["x.nac", "y.nac"] and a.screenshot == "out.png" and a.select == 12
    assert parse_args([]).files == []


def test_default_model_prefers_a_compiled_demo(tmp_path):
    assert demo_model(tmp_path) is None
    (tmp_path / "demo_mlp.nac").write_bytes(b"")
    assert demo_model(tmp_path).name == "demo_mlp.nac"
    (tmp_path / "cnn_small.nac").write_bytes(b"")
    assert demo_model(tmp_path).name == "cnn_small.nac"
    (tmp_path / "tiny_bert.nac").write_bytes(b"")
    assert demo_model(tmp_path).name == "tiny_bert.nac"


def test_screenshot_of_the_default_demo(tmp_path, qapp):
    from PySide6.QtGui import QImage
    out = tmp_path / "shot.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "config"))
    proc = subprocess.run([sys.executable, "-m", "nac_studio", "--screenshot", str(out), "--select", "3"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.is_file() and out.stat().st_size > 30_000
    img = QImage(str(out))
    assert (img.width(), img.height()) == (1600, 1000)
    # not blank: many distinct colours across a coarse grid of samples
    colours = {img.pixel(x, y) for x in range(0, 1600, 13) for y in range(0, 1000, 11)}
    assert len(colours) > 40
    # a screenshot run must not leave saved settings behind
    assert not any((tmp_path / "config").rglob("*.conf"))
