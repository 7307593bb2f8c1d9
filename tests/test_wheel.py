"""A non-editable install ships what a user needs: the hardware presets and the demo models are
package data. The wheel is built, installed into a directory of its own, and run from there
(not from the source tree): `nac sim` on a bundled demo with a bundled preset, and the Studio's
offscreen screenshot of the demo it opens by default."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

# minutes of CPU: the default tier skips them, .ci/run runs them (pytest -m heavy)
pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_ships_presets_and_demos_and_runs_from_its_install(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(wheels)],
                   check=True, timeout=600, capture_output=True)
    (wheel,) = wheels.glob("nac_studio-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "nac_engine/sim/presets/edge-32x32.toml" in names and "nac_studio/demos/demo_bert_tiny.nac" in names
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, timeout=600, capture_output=True)
    # the installed copy first on the path; the dependencies (torch, Qt...) from this environment
    env = {**os.environ, "PYTHONPATH": str(target), "QT_QPA_PLATFORM": "offscreen"}
    run_here = tmp_path / "elsewhere"
    run_here.mkdir()
    code = textwrap_code(target)
    r = subprocess.run([sys.executable, "-P", "-c", code], cwd=run_here, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["engine"].startswith(str(target)) and got["studio"].startswith(str(target))
    # the Studio's own stderr (faulthandler's stack on a crash) is in r.stderr: show it on failure
    assert got["sim_exit"] == 0 and got["screenshot_exit"] == 0, r.stderr[-4000:]
    assert (run_here / "shot.png").stat().st_size > 10_000


def textwrap_code(target: Path) -> str:
    return f"""
import json, os, subprocess, sys
import nac_engine, nac_studio
from nac_studio.app import demo_model
demo = demo_model()
assert demo is not None and str(demo).startswith({str(target)!r}), demo
from nac_engine.cli import main
sim_exit = main(["sim", str(demo), "--hw", "edge-32x32"])
shot = subprocess.run([sys.executable, "-P", "-m", "nac_studio", "--screenshot", "shot.png"], timeout=300).returncode
print(json.dumps({{"engine": nac_engine.__file__, "studio": nac_studio.__file__, "sim_exit": sim_exit,
                  "screenshot_exit": shot}}))
"""
