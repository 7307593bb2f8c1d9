"""Starting the Studio where there is no display: a one-line explanation and exit 2, not Qt's abort."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nac_studio.display_check import missing_display


@pytest.mark.parametrize("env, none", [
    ({}, False),
    ({"QT_QPA_PLATFORM": "offscreen"}, True),
    ({"QT_QPA_PLATFORM": "minimal"}, True),
    ({"WAYLAND_DISPLAY": "wayland-0"}, True),
    ({"QT_QPA_PLATFORM": "xcb"}, False),
    ({"QT_QPA_PLATFORM": "wayland;xcb", "DISPLAY": ""}, False),
    ({"DISPLAY": "remotehost:0"}, True),          # remote X: trusted, Qt reports its own failure
    ({"DISPLAY": ":8765"}, False),                # local display with no server listening
])
def test_missing_display_rules(env, none):
    assert (missing_display(env, platform="linux") is None) is none


def test_other_platforms_always_have_a_display():
    assert missing_display({}, platform="darwin") is None
    assert missing_display({}, platform="win32") is None


def test_no_display_exits_2_with_advice():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    r = subprocess.run([sys.executable, "-m", "nac_studio"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "xvfb-run" in lines[0] and "QT_QPA_PLATFORM=offscreen" in lines[0]
    assert f"xvfb-run -a {sys.executable} -m nac_studio" in lines[0]       # the interpreter that has the Studio
    assert "xcb" not in lines[0]
