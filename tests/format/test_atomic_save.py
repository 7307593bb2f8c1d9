"""Atomic saves as a user sees them: file modes like an ordinary write, no temp left behind."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from nac_engine.format.writer import atomic_produce, atomic_write, current_umask, remove_orphaned_temps


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_new_file_gets_the_umask_mode(tmp_path, umask):
    old = os.umask(umask)
    try:
        assert current_umask() == umask
        atomic_write(str(tmp_path / "a.nac"), b"x")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "a.nac") == 0o666 & ~umask


def test_overwrite_keeps_the_existing_mode(tmp_path):
    p = tmp_path / "a.nac"
    p.write_bytes(b"old")
    os.chmod(p, 0o640)
    atomic_write(str(p), b"new")
    assert p.read_bytes() == b"new" and _mode(p) == 0o640
    os.chmod(p, 0o604)
    atomic_produce(str(p), lambda _fh, tmp: open(tmp, "wb").write(b"by name"), prefix=".nac-weights-")
    assert p.read_bytes() == b"by name" and _mode(p) == 0o604


def test_failed_save_leaves_nothing(tmp_path):
    p = tmp_path / "a.nac"
    p.write_bytes(b"keep")

    def boom(fh, _tmp):
        fh.write(b"partial")
        raise RuntimeError("disk full")
    with pytest.raises(RuntimeError):
        atomic_produce(str(p), boom)
    assert p.read_bytes() == b"keep" and sorted(os.listdir(tmp_path)) == ["a.nac"]


def test_killed_save_temp_is_removed_by_the_next_save(tmp_path):
    """A save SIGKILLed mid-write leaves its temp; the next save into the directory deletes it
    (its process is gone) and leaves a live process's temp and foreign files alone."""
    script = textwrap.dedent(f"""
        import os, signal
        from nac_engine.format.writer import atomic_produce
        def produce(fh, tmp):
            fh.write(b"x" * 100000); fh.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        atomic_produce({str(tmp_path / 'out.nac')!r}, produce)
    """)
    r = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd())
    assert r.returncode == -9
    left = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    assert len(left) == 1 and left[0].startswith(".nac-")
    live = tmp_path / f".nac-{os.getpid()}-abc123.tmp"       # ours, still being written
    live.write_bytes(b"busy")
    foreign = tmp_path / ".nac-notours.tmp"
    foreign.write_bytes(b"?")
    weights_orphan = tmp_path / ".nac-weights-999999999-zz.tmp"
    weights_orphan.write_bytes(b"w")
    atomic_write(str(tmp_path / "other.nac"), b"y")
    names = sorted(os.listdir(tmp_path))
    assert names == sorted([live.name, foreign.name, weights_orphan.name, "other.nac"])
    assert remove_orphaned_temps(str(tmp_path), ".nac-weights-") == [str(weights_orphan)]


def test_compiled_external_weights_get_ordinary_modes(tmp_path):
    import safetensors  # noqa: F401
    import numpy as np
    from nac_engine.compiler.external import write_compiled
    from tests.format.test_regressions import small_file
    nac = small_file()
    nac.header.weights_internal = False
    for p in nac.params.values():
        p._payload = np.frombuffer(p._payload, "<f4").reshape(p.meta.shape)
    old = os.umask(0o022)
    try:
        written = write_compiled(nac, tmp_path / "m.nac")
    finally:
        os.umask(old)
    assert len(written) == 2
    assert all(_mode(w) == 0o644 for w in written)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_dis_output_is_all_or_nothing(tmp_path, monkeypatch, capsys):
    """`nac dis -o` interrupted midway leaves the previous text intact and no temp file."""
    from pathlib import Path
    import nac_engine.text.disasm as disasm
    from nac_engine.cli import main
    mlp = Path(__file__).resolve().parents[2] / "nac_studio" / "demos" / "demo_mlp.nac"
    out = tmp_path / "m.nas"
    out.write_text("previous\n")
    real = disasm.iter_disassembly

    def dies_midway(*a, **k):
        for i, line in enumerate(real(*a, **k)):
            if i == 5:
                raise KeyboardInterrupt
            yield line
    monkeypatch.setattr(disasm, "iter_disassembly", dies_midway)
    assert main(["dis", str(mlp), "-o", str(out)]) == 130
    assert out.read_text() == "previous\n" and os.listdir(tmp_path) == ["m.nas"]
    monkeypatch.setattr(disasm, "iter_disassembly", real)
    assert main(["dis", str(mlp), "-o", str(out)]) == 0
    assert out.read_text().startswith("; NAC v1.6 disassembly")


def test_saving_over_a_symlink_writes_through_to_its_target(tmp_path):
    """As editors do: the link stays a link, the target gets the bytes (relative links and links
    to links too)."""
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "model.nac"
    target.write_bytes(b"old")
    link = tmp_path / "link.nac"
    link.symlink_to(os.path.join("real", "model.nac"))
    chain = tmp_path / "chain.nac"
    chain.symlink_to(link)
    atomic_write(str(link), b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"
    atomic_write(str(chain), b"newer")
    assert chain.is_symlink() and link.is_symlink() and target.read_bytes() == b"newer"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["model.nac"]


def test_saving_over_a_fifo_or_directory_is_refused(tmp_path):
    fifo = tmp_path / "pipe.nac"
    os.mkfifo(fifo)
    (tmp_path / "dir.nac").mkdir()
    for path in (fifo, tmp_path / "dir.nac", tmp_path / "to_fifo.nac"):
        if path.name == "to_fifo.nac":
            path.symlink_to(fifo)
        with pytest.raises(OSError, match="not a regular file"):
            atomic_write(str(path), b"x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and [p.name for p in tmp_path.iterdir() if p.name.startswith(".nac-")] == []
