#!/usr/bin/env bash
# The README's screenshot, made anew: the Studio on the bundled BERT demo, stopped mid-run with
# the tensor inspector open, in a virtual 1600x1000 display with fresh settings.
#   scripts/readme_screenshot.sh [OUT.png]      (default resources/studio.png)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-resources/studio.png}
settings=$(mktemp -d)
trap 'rm -rf "$settings"' EXIT
XDG_CONFIG_HOME="$settings" xvfb-run -a -s "-screen 0 1600x1000x24" env QT_QPA_PLATFORM=xcb \
    .venv/bin/nac-studio nac_studio/demos/demo_bert_tiny.nac --run-to 30 --inspect v30 --size 1600x1000 \
    --screenshot "$out"
echo "wrote $out"
