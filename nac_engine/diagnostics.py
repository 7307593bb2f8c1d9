"""What a user pastes into a bug report: this tool's version and those of what it runs on.

Versions are read from the installed packages' metadata, not by importing them (``nac --version``
must not wait for torch)."""
from __future__ import annotations

import platform
import sys
from importlib import metadata

#: Packages whose versions matter to a bug report, by distribution name.
PACKAGES = ("torch", "numpy", "safetensors", "tokenizers", "PySide6-Essentials", "pyqtgraph", "igraph")


def version() -> str:
    """This package's version (the source tree's pyproject when it is not installed)."""
    try:
        return metadata.version("nac-studio")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def versions(extra: dict | None = None) -> dict[str, str]:
    """Name -> version of this tool, Python, the platform and :data:`PACKAGES` (``extra`` adds
    what only the caller knows, such as the Qt library a window runs on)."""
    out = {"nac-studio": version(), "Python": f"{platform.python_version()} ({sys.executable})",
           "platform": platform.platform()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    out.update(extra or {})
    return out


def report(extra: dict | None = None) -> str:
    """:func:`versions` as lines of ``name: version``."""
    return "\n".join(f"{k}: {v}" for k, v in versions(extra).items())
