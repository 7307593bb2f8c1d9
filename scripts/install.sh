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
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    echo "install.sh: $PY is $("$PY" -V 2>&1), too old; NAC Studio needs Python 3.11 or newer (PYTHON=python3.11 $0)" >&2
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

# An environment installed from the same pyproject.toml and constraints is up to date: a second run
# (the README's test command runs this first) is a no-op instead of 45 s of pip resolving.
stamp="$VENV/.nac-install-stamp"
want=$(cat pyproject.toml "${PIP_CONSTRAINT:-/dev/null}" 2>/dev/null | "$VENV/bin/python" -c \
       'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c 'import nac_engine, nac_studio' 2>/dev/null; then
    echo "== $VENV is up to date (pyproject.toml and constraints unchanged): nothing to install"
else
    echo "== pip install -e .[test] into $VENV"
    "$VENV/bin/python" -m pip install --disable-pip-version-check -q -e ".[test]"
    echo "$want" > "$stamp"
fi
echo "== ready: $VENV/bin/nac-studio, $VENV/bin/nac, $VENV/bin/python -m pytest"
