"""Where the shared corpus lives; tests skip when it is absent."""
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
NAC_FILES = sorted((CORPUS / "nac").glob("*/*.nac")) if (CORPUS / "nac").is_dir() else []
