#!/usr/bin/env bash
# One-step set-up on a fresh machine: Qt's system libraries (apt, only those missing), then
# the package with its test extras (CPU torch 2.13 from the local wheel index).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

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
if [ "${#need[@]}" -gt 0 ]; then
    echo "== apt-get install ${need[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -q || true
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
fi

echo "== pip install -e .[test]"
$PY -m pip install --disable-pip-version-check -q -e ".[test]"
