"""The VS Code extension: packaged as a .vsix with @vscode/vsce (installed by scripts/install.sh
from tests/dap's lockfile), and its launch attributes are the ones `nac dap` reads."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

# scripts/install.sh may rebuild tests/dap/node_modules, which the DAP suites run from: one worker
pytestmark = pytest.mark.xdist_group("node_modules")

REPO = Path(__file__).resolve().parents[2]
EXT = REPO / "resources" / "vscode"
VSCE = REPO / "tests" / "dap" / "node_modules" / "@vscode" / "vsce" / "vsce"


def test_extension_packages_as_a_vsix(tmp_path):
    node = shutil.which("node")
    assert node is not None, "node is not installed: run scripts/install.sh (it installs Node.js)"
    assert VSCE.is_file(), "@vscode/vsce is missing: run scripts/install.sh (npm ci in tests/dap)"
    out = tmp_path / "nac-debug.vsix"
    r = subprocess.run([node, str(VSCE), "package", "--allow-missing-repository", "--out", str(out)], cwd=EXT,
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        assert {"extension/package.json", "extension/extension.js", "extension/README.md"} <= names
        manifest = json.loads(z.read("extension/package.json"))
    dbg = manifest["contributes"]["debuggers"][0]
    assert dbg["type"] == "nac" and manifest["main"] == "./extension.js"
    assert any(".nac" in lang.get("extensions", []) for lang in manifest["contributes"]["languages"])
    assert dbg["initialConfigurations"][0]["request"] == "launch"


def test_launch_attributes_are_the_adapters():
    """Every launch attribute the manifest offers is read by the adapter (and nacPath by the extension)."""
    manifest = json.loads((EXT / "package.json").read_text())
    offered = set(manifest["contributes"]["debuggers"][0]["configurationAttributes"]["launch"]["properties"])
    adapter = (REPO / "nac_engine" / "dap" / "adapter.py").read_text()
    read = set(re.findall(r'args\.get\("(\w+)"', adapter)) | set(re.findall(r'_launch\.get\("(\w+)"', adapter))
    assert offered - {"nacPath"} <= read, offered - read
    assert "nacPath" in (EXT / "extension.js").read_text()
