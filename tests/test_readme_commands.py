"""Every command the README shows works as written: a script it names exists, and is either run
with the venv's interpreter in the text (``.venv/bin/python path.py``) or executable itself."""
from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
_SCRIPT = re.compile(r"(?<![\w/.])((?:benchmarks|resources|scripts|\.ci)/[\w./-]+\.(?:py|sh)|\.ci/run)\b")


def _code_texts() -> list[str]:
    """Fenced code lines and inline code spans (a span may wrap across a line break)."""
    fenced = re.findall(r"```[a-z]*\n(.*?)```", README, flags=re.S)
    rest = re.sub(r"```[a-z]*\n.*?```", "", README, flags=re.S)
    spans = re.findall(r"`([^`]+)`", rest)
    return [line for block in fenced for line in block.splitlines()] + [" ".join(s.split()) for s in spans]


def test_every_script_the_readme_names_exists_and_runs_as_written():
    seen = 0
    for text in _code_texts():
        for m in _SCRIPT.finditer(text):
            path = ROOT / m.group(1)
            assert path.is_file(), f"the README names {m.group(1)}, which does not exist ({text!r})"
            with_interpreter = text[:m.start()].rstrip().endswith((".venv/bin/python", "python"))
            executable = os.access(path, os.X_OK) and path.read_bytes().startswith(b"#!")
            assert with_interpreter or executable, \
                f"{m.group(1)} is shown as a command but is not executable: show it with .venv/bin/python ({text!r})"
            seen += 1
    assert seen >= 5
