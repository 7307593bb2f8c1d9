"""Shared fixtures: the corpus of real ``.nac`` files written by the reference compiler.

The corpus lives outside the repository (``../shared/corpus`` relative to the repo root).
Every test that needs it skips cleanly when it is absent.

* ``corpus_file``   — parametrised: one test per ``*/*.nac`` (id = the case folder name)
* ``corpus_files``  — the whole list (skips when empty)
* ``corpus_index``  — ``INDEX.md``'s table, parsed: case name -> row dict
* ``corpus_case``   — ``corpus_case("mlp")`` -> path of that case's ``.nac`` (skips if missing)
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

# Keep bytecode caches for the test modules (pytest's rewritten ones) and the package even where
# PYTHONDONTWRITEBYTECODE is set, as on our CI machines: otherwise every xdist worker compiles all
# ~190 test modules again (collection 4.5 s -> 9.7 s) and every subprocess the package again.
sys.dont_write_bytecode = False

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
NAC_CORPUS = CORPUS / "nac"


def nac_corpus_files() -> list[Path]:
    """Every corpus ``.nac`` (sorted); empty when the shared corpus is absent."""
    if not NAC_CORPUS.is_dir():
        return []
    return sorted(NAC_CORPUS.glob("*/*.nac"))


def corpus_params() -> list:
    """``pytest.param`` per corpus file, or one skipped param when there is no corpus."""
    files = nac_corpus_files()
    if not files:
        return [pytest.param(None, id="no-corpus",
                             marks=pytest.mark.skip(reason=f"corpus not present at {NAC_CORPUS}"))]
    return [pytest.param(p, id=p.parent.name) for p in files]


@pytest.fixture(params=corpus_params())
def corpus_file(request) -> Path:
    return request.param


@pytest.fixture(scope="session")
def corpus_files() -> list[Path]:
    files = nac_corpus_files()
    if not files:
        pytest.skip(f"corpus not present at {NAC_CORPUS}")
    return files


@pytest.fixture(scope="session")
def corpus_case():
    """``corpus_case(name)``: the ``.nac`` in ``<corpus>/nac/<name>/`` (skips if absent)."""
    def get(name: str) -> Path:
        found = sorted((NAC_CORPUS / name).glob("*.nac")) if (NAC_CORPUS / name).is_dir() else []
        if not found:
            pytest.skip(f"corpus case {name!r} not present under {NAC_CORPUS}")
        return found[0]
    return get


def parse_index(text: str) -> dict[str, dict]:
    """INDEX.md's markdown table -> {case: {column header: cell text}}."""
    rows: dict[str, dict] = {}
    header = None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        rows[cells[0]] = dict(zip(header, cells))
    return rows


@pytest.fixture(scope="session")
def corpus_index() -> dict[str, dict]:
    index = NAC_CORPUS / "INDEX.md"
    if not index.is_file():
        pytest.skip(f"corpus index not present at {index}")
    return parse_index(index.read_text(encoding="utf-8"))
