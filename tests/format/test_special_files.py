"""A path that is not a regular file (a FIFO, a device behind an innocent name, a directory) is
refused at once, with the one error type, wherever a user's path is opened: nothing blocks on a
FIFO and nothing reads /dev/zero."""
from __future__ import annotations

import os

import numpy as np
import pytest

from nac_engine import NacFormatError, read, write
from nac_engine.files import open_regular
from nac_engine.peers import read_bounded
from tests.format.test_whole_read import runnable_file
from tests.cli_fork import run_cli

CLI_TIMEOUT = 60         # a FIFO that blocked would hang the command far past this


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "model.nac"
    os.mkfifo(path)
    return path


@pytest.fixture
def zero_neff(tmp_path):
    path = tmp_path / "model.neff"
    path.symlink_to("/dev/zero")
    return path


def nac_cli(*args):
    return run_cli(args, timeout=CLI_TIMEOUT)


def test_open_regular_names_what_the_path_is(fifo, zero_neff, tmp_path):
    for path, words in ((fifo, "a FIFO"), (zero_neff, "a character device"), (tmp_path, "a directory")):
        with pytest.raises(NacFormatError) as e:
            open_regular(path)
        assert words in e.value.reason and e.value.section == "file"


def test_read_and_peer_reads_refuse_special_files(fifo, zero_neff):
    with pytest.raises(NacFormatError, match="FIFO"):
        read(fifo)
    with pytest.raises(NacFormatError, match="character device"):
        read_bounded(str(zero_neff))


@pytest.mark.parametrize("command", ["info", "verify", "dis", "run"])
def test_cli_refuses_a_fifo_without_waiting(fifo, command):
    r = nac_cli(command, fifo)
    assert r.returncode == 2, r
    assert "FIFO" in r.stderr and "Traceback" not in r.stderr
    assert "@ 0x0" not in r.stderr          # the path's own problem: no byte offset to give


def test_cli_refuses_a_device_named_like_a_peer_file(zero_neff):
    r = nac_cli("info", zero_neff)
    assert r.returncode == 2 and "character device" in r.stderr and "Traceback" not in r.stderr


def test_input_and_external_weight_files_must_be_regular(tmp_path):
    model = tmp_path / "m.nac"
    model.write_bytes(write(runnable_file()))
    feed = tmp_path / "x.npy"
    os.mkfifo(feed)
    r = nac_cli("run", model, "--input", f"x={feed}")
    assert r.returncode == 2 and "FIFO" in r.stderr and "Traceback" not in r.stderr
    np.save(tmp_path / "ok.npy", np.ones((1, 3), np.float32))
    assert nac_cli("run", model, "--input", f"x={tmp_path / 'ok.npy'}").returncode == 0

    nac = runnable_file()
    nac.header.weights_internal = False
    ext = tmp_path / "ext.nac"
    ext.write_bytes(write(nac))
    os.mkfifo(tmp_path / "ext.safetensors")
    r = nac_cli("run", ext, "--input", f"x={tmp_path / 'ok.npy'}")
    assert r.returncode == 2 and "FIFO" in r.stderr and "Traceback" not in r.stderr
