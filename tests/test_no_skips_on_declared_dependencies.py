"""A declared dependency that does not import is a failure, not a skip: no test may skip on one."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_test_skips_on_an_import():
    offenders = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "importorskip":
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert not offenders, offenders
