#!/usr/bin/env bash
# One-step set-up on a fresh machine: Qt's system libraries (apt, only those missing), a virtual
# environment in .venv (so a distribution Python that refuses system-wide installs, PEP 668, works
# as well as any other), then the package with its test extras into it (CPU torch 2.13 from the
# local wheel index). Run the tools afterwards as .venv/bin/nac-studio, .venv/bin/nac and
# .venv/bin/python -m pytest, or `source .venv/bin/activate` first.
#
#   PYTHON=python3.12 scripts/install.sh     the interpreter the venv is made from (default python3)
#   NAC_VENV=/path/to/env scripts/install.sh  another venv location (created when missing)
#   PIP_CONSTRAINT=constraints/ci.txt ...     exact versions (what .ci/run does)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${NAC_VENV:-.venv}

if ! command -v "$PY" >/dev/null 2>&1; then
    echo "install.sh: $PY was not found (not on PATH); give the interpreter's path: PYTHON=/path/to/python3.12 $0" >&2
    exit 2
fi
# a name that is found but does not run (a pyenv shim for a version pyenv has not selected) is
# not "too old": say what running it printed
if ! version=$("$PY" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>&1); then
    echo "install.sh: $PY does not run: $(printf '%s' "$version" | head -n 6)" >&2
    echo "install.sh: give a Python 3.11 or newer that runs: PYTHON=/path/to/python3.12 $0" >&2
    exit 2
fi
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    echo "install.sh: $PY is Python $version, too old; NAC Studio needs Python 3.11 or newer (PYTHON=python3.11 $0)" >&2
    exit 2
fi

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
# another apt (unattended upgrades on a fresh Ubuntu) may hold the lock: wait for it, visibly
# and for at most APT_LOCK_WAIT seconds, instead of failing at once
APT_WAIT=(-o "DPkg::Lock::Timeout=${APT_LOCK_WAIT:-300}")
apt_install() {
    echo "== apt-get install $* (waits up to ${APT_LOCK_WAIT:-300} s for another apt to finish)"
    $SUDO apt-get "${APT_WAIT[@]}" update -q || true
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${APT_WAIT[@]}" install -y -q --no-install-recommends "$@"
}

need=()
if command -v dpkg >/dev/null 2>&1; then
    # offscreen tests need the first five; a real window (xcb) and xvfb-run need the rest
    for pkg in libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3 \
               libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 \
               libxcb-render-util0 libxcb-shape0 libxcb-randr0 libxcb-xinerama0 libxcb-xkb1 \
               xvfb xauth; do
        dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
    done
fi
if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    # macOS, Fedora, Arch...: PySide6's wheels carry Qt itself; only the OpenGL/xkb/X11 client
    # libraries of the system are used, which a desktop has
    echo "== no apt here: system packages skipped (PySide6 brings Qt; a desktop has the libraries it uses;"
    echo "   headless Linux needs libEGL, libxkbcommon, fontconfig and, for a window without a display, Xvfb)"
    need=()
fi
if [ "${#need[@]}" -gt 0 ]; then apt_install "${need[@]}"; fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "== $PY -m venv $VENV"
    if ! "$PY" -m venv "$VENV" 2>/dev/null; then
        # Debian/Ubuntu ship venv's pip bootstrap (ensurepip) in a separate package
        rm -rf "$VENV"
        ver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
        command -v apt-get >/dev/null 2>&1 && apt_install "python$ver-venv" || true
        "$PY" -m venv "$VENV"
    fi
fi

# torch first, and a CPU build of it: PyPI's Linux wheels of torch pull CUDA and ~3.7 GB of NVIDIA
# packages. In order: torch already in the venv; TORCH_INDEX (a CPU index or mirror you name); a
# local wheel pip can find without an index (PIP_FIND_LINKS); PyTorch's CPU index when it answers.
# Otherwise only the CUDA build is reachable: say so, and its size, and go on only with
# NAC_ALLOW_CUDA_TORCH=1.
TORCH_SPEC="torch>=2.13,<2.14"
TORCH_CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
# torch alone (--no-deps): its dependencies come from PyPI with the package's own install below
pip_torch() { "$VENV/bin/python" -m pip install --disable-pip-version-check -q --no-deps "$@"; }
install_cpu_torch() {
    if "$VENV/bin/python" -c 'import torch' >/dev/null 2>&1; then
        return
    fi
    if [ -n "${TORCH_INDEX:-}" ]; then
        echo "== torch from TORCH_INDEX=$TORCH_INDEX"
        pip_torch --index-url "$TORCH_INDEX" "$TORCH_SPEC"
        return
    fi
    if pip_torch --no-index "$TORCH_SPEC" >/dev/null 2>&1; then
        echo "== torch from a local wheel (${PIP_FIND_LINKS:-the find-links pip is given})"
        return
    fi
    if "$VENV/bin/python" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/torch/', timeout=5)" \
            "$TORCH_CPU_INDEX" >/dev/null 2>&1; then
        echo "== torch, CPU build, from $TORCH_CPU_INDEX"
        pip_torch --index-url "$TORCH_CPU_INDEX" "$TORCH_SPEC"
        return
    fi
    if [ "${NAC_ALLOW_CUDA_TORCH:-0}" != 1 ]; then
        echo "install.sh: no CPU build of torch is reachable for $("$VENV/bin/python" -V 2>&1): not in TORCH_INDEX," >&2
        echo "  not as a local wheel, and $TORCH_CPU_INDEX does not answer. PyPI's torch for Linux is a CUDA build:" >&2
        echo "  about 3.7 GB of NVIDIA packages beside torch (a ~5.5 GB environment instead of ~1.8 GB)." >&2
        echo "  Give a CPU index (TORCH_INDEX=URL $0), or accept the download: NAC_ALLOW_CUDA_TORCH=1 $0" >&2
        exit 2
    fi
    echo "== torch from PyPI with the rest (a CUDA build, ~3.7 GB of NVIDIA packages: NAC_ALLOW_CUDA_TORCH=1)"
}

# An environment installed from the same pyproject.toml and constraints is up to date: a second run
# (the README's test command runs this first) is a no-op instead of 45 s of pip resolving.
stamp="$VENV/.nac-install-stamp"
want=$(cat pyproject.toml "${PIP_CONSTRAINT:-/dev/null}" 2>/dev/null | "$VENV/bin/python" -c \
       'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c 'import nac_engine, nac_studio' 2>/dev/null; then
    echo "== $VENV is up to date (pyproject.toml and constraints unchanged): nothing to install"
else
    install_cpu_torch
    echo "== pip install -e .[test] into $VENV"
    "$VENV/bin/python" -m pip install --disable-pip-version-check -q -e ".[test]"
    echo "$want" > "$stamp"
fi
# An editable install leaves the project's own modules without bytecode; where PYTHONDONTWRITEBYTECODE
# is set (it is on our CI machines) every process then compiles them again: 0.3 s more for every
# `nac`, Studio and engine-host start. Compile them once, as pip does for a regular install (a
# module edited later is compiled in memory until this runs again: slower, never stale).
"$VENV/bin/python" -m compileall -q -j 0 nac_engine nac_studio >/dev/null
# Node.js runs the DAP acceptance suite (tests/dap: VS Code's DebugClient under mocha) and packages
# the VS Code extension (@vscode/vsce); Debian's nodejs (18) is enough. The Studio and `nac` do not
# need it: where apt cannot install it, say so and go on (those tests then fail, saying why). The
# npm packages come from the committed lockfile (npm ci), without install scripts (none of them
# needs one), once per lockfile.
node_ok() {
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
        node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' 2>/dev/null
}
if ! node_ok && command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1; then
    apt_install nodejs npm
fi
if ! node_ok; then
    echo "== Node.js 18+ with npm not found: the DAP tests (tests/dap) need it; install it (https://nodejs.org"
    echo "   or your package manager) and run this again. The Studio and nac work without it."
else
    npm_stamp=tests/dap/node_modules/.nac-lock-stamp
    want_npm=$(node -e 'const c = require("crypto"), fs = require("fs");
        process.stdout.write(c.createHash("sha256").update(fs.readFileSync("tests/dap/package-lock.json"))
                             .update(process.version).digest("hex"))')
    if [ -f "$npm_stamp" ] && [ "$(cat "$npm_stamp")" = "$want_npm" ]; then
        echo "== tests/dap/node_modules is up to date (package-lock.json unchanged)"
    else
        echo "== npm ci in tests/dap (mocha, @vscode/debugadapter-testsupport, @vscode/vsce)"
        (cd tests/dap && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
        echo "$want_npm" > "$npm_stamp"
    fi
fi
echo "== ready: $VENV/bin/nac-studio, $VENV/bin/nac, $VENV/bin/python -m pytest"
