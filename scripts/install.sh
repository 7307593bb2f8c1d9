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

if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    echo "install.sh: $PY is $("$PY" -V 2>&1); NAC Studio needs Python 3.11 or newer (PYTHON=python3.11 $0)" >&2
    exit 2
fi

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
apt_install() {
    echo "== apt-get install $*"
    $SUDO apt-get update -q || true
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "$@"
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
[ "${#need[@]}" -gt 0 ] && apt_install "${need[@]}"

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

echo "== pip install -e .[test] into $VENV"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -e ".[test]"
echo "== ready: $VENV/bin/nac-studio, $VENV/bin/nac, $VENV/bin/python -m pytest"
