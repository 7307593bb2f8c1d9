"""Issue 15 §5: files ``verify`` calls ok never fail later for a format reason. Each test is a
minimal reproducer of a defect found past read/verify/dis (hostile tensor metadata, external
weights, tokenizer resources, a file shrinking while open); built from the model classes, no
corpus needed. Every lazy path raises the one error type, naming section, offset and reason."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from nac_engine import NacFormatError, read, verify, write
from nac_engine.cli import main
from nac_engine.format import layout as L
from nac_engine.format.model import Resource, TensorMeta
from tests.format.test_regressions import small_file


def _with_meta(tmp_path, meta: TensorMeta, payload: bytes, name="bad.nac"):
    nac = small_file()
    p = nac.params[1]
    p.meta, p._payload = meta, payload
    path = tmp_path / name
    path.write_bytes(write(nac))
    return path


def _assert_lazy_paths_refuse(path, capsys, section="DATA/tensors"):
    """verify lists the problem; raw()/array(), the interpreter and `nac run` raise NacFormatError."""
    probs = verify(path)
    assert probs and all(isinstance(p, NacFormatError) for p in probs)
    assert any(p.section.startswith(section) for p in probs), probs
    with read(path, strict=False) as nac:
        p = nac.param_by_name("w")
        for fn in (p.raw, p.array):
            with pytest.raises(NacFormatError) as info:
                fn()
            assert info.value.section.startswith(section) and 0 <= info.value.offset <= os.path.getsize(path)
    code = main(["run", str(path), "--input", "x=1x3"])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "internal error" not in err, err
    return probs


# --------------------------------------------------------------------------- internal tensor metadata
def test_shape_product_overflowing_int64(tmp_path, capsys):
    """2**32 x 2**32 float32 wraps to 0 bytes in int64 arithmetic: it used to match an empty payload."""
    path = _with_meta(tmp_path, TensorMeta(0, (2 ** 16,) * 4, 0), b"")
    with pytest.raises(NacFormatError):
        read(path)                      # the strict read refuses it: the product is really huge
    _assert_lazy_paths_refuse(path, capsys)


def test_rank_above_numpy_limit(tmp_path, capsys):
    path = _with_meta(tmp_path, TensorMeta(0, (1,) * 255, 0), b"\0\0\0\0")
    read(path).close()                  # decodes: the bytes are consistent
    probs = _assert_lazy_paths_refuse(path, capsys)
    assert any("rank 255" in p.reason for p in probs)


def test_int8_channel_axis_past_rank(tmp_path, capsys):
    meta = TensorMeta(7, (2, 3), L.QUANT_INT8_CHANNEL, axis=5, scales=np.ones(2, np.float32))
    probs = _assert_lazy_paths_refuse(_with_meta(tmp_path, meta, bytes(6)), capsys)
    assert any("axis 5" in p.reason for p in probs)


def test_int8_channel_scale_count(tmp_path, capsys):
    meta = TensorMeta(7, (2, 3), L.QUANT_INT8_CHANNEL, axis=0, scales=np.ones(7, np.float32))
    probs = _assert_lazy_paths_refuse(_with_meta(tmp_path, meta, bytes(6)), capsys)
    assert any("7 scales for 2 channels" in p.reason for p in probs)


def test_block_fp8_payload_not_splitting_into_blocks(tmp_path, capsys):
    meta = TensorMeta(7, (100,), L.QUANT_BLOCK_FP8, block_size=64, original_shape=(2, 3),
                      scales=np.ones(2, np.float32))
    probs = _assert_lazy_paths_refuse(_with_meta(tmp_path, meta, bytes(100)), capsys)
    assert any("does not split" in p.reason for p in probs)


def test_clean_quantised_tensor_still_loads(tmp_path):
    meta = TensorMeta(7, (2, 3), L.QUANT_INT8_CHANNEL, axis=0, scales=np.array([1, 2], np.float32))
    path = _with_meta(tmp_path, meta, bytes([1, 2, 3, 4, 5, 6]))
    assert verify(path) == []
    with read(path) as nac:
        assert nac.param_by_name("w").array().tolist() == [[1, 2, 3], [8, 10, 12]]


# --------------------------------------------------------------------------- external weights
@pytest.fixture
def external(tmp_path):
    import safetensors  # noqa: F401
    from nac_engine.compiler.external import write_compiled
    nac = small_file()
    nac.header.weights_internal = False
    for p in nac.params.values():
        p._payload = np.frombuffer(p._payload, "<f4").reshape(p.meta.shape)
    path = tmp_path / "ext.nac"
    write_compiled(nac, path)
    assert verify(path) == []
    return path


def _external_refused(path, capsys, text):
    probs = verify(path)
    assert probs and any(text in p.reason for p in probs), probs
    with read(path) as nac:
        with pytest.raises(NacFormatError) as info:
            nac.param_by_name("w").array()
        assert text in info.value.reason
    code = main(["run", str(path), "--input", "x=1x3"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "internal error" not in err and text in err, err


def test_external_missing(external, capsys):
    os.unlink(external.with_suffix(".safetensors"))
    _external_refused(external, capsys, "does not exist")


def test_external_oversized_header(external, capsys):
    st = external.with_suffix(".safetensors")
    data = bytearray(st.read_bytes())
    data[:8] = struct.pack("<Q", 2 ** 62)
    st.write_bytes(bytes(data))
    _external_refused(external, capsys, "header of")


def test_external_truncated_header(external, capsys):
    st = external.with_suffix(".safetensors")
    n = struct.unpack("<Q", st.read_bytes()[:8])[0]
    st.write_bytes(st.read_bytes()[:8 + n // 2])
    _external_refused(external, capsys, "runs past the end")


def test_external_deeply_nested_quant_metadata(external, capsys):
    from safetensors.numpy import save_file
    st = external.with_suffix(".safetensors")
    deep = "[" * 5000 + "]" * 5000
    save_file({"w": np.zeros((2, 3), np.int8)}, str(st), metadata={"w": deep})
    _external_refused(external, capsys, "levels deep")


def test_external_int8_channel_scales_not_fitting(external, capsys):
    from safetensors.numpy import save_file
    st = external.with_suffix(".safetensors")
    entry = {"quant_type": "INT8_CHANNEL", "axis": 0, "scales": [1.0, 2.0, 3.0]}
    save_file({"w": np.zeros((2, 3), np.int8)}, str(st), metadata={"w": json.dumps(entry)})
    _external_refused(external, capsys, "3 scales for 2 channels")


# --------------------------------------------------------------------------- tokenizer resources
@pytest.mark.parametrize("files", [
    {"tokenizer.json": "[" * 3000 + "]" * 3000},
    {"vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n",
     "tokenizer_config.json": '{"x": ' + "[" * 3000 + "]" * 3000 + "}"},
], ids=["tokenizer.json", "tokenizer_config.json"])
def test_tokenizer_deeply_nested_json(files):
    import tokenizers  # noqa: F401
    from nac_engine.compiler.tokenizer import load_tokenizer
    nac = small_file()
    nac.rsrc = [Resource(name, _payload=text.encode()) for name, text in files.items()]
    nac = read(write(nac))
    with pytest.raises(NacFormatError) as info:
        load_tokenizer(nac)
    assert info.value.section.startswith("RSRC/") and "levels deep" in info.value.reason


def test_embedding_a_deeply_nested_tokenizer_config(tmp_path):
    import tokenizers  # noqa: F401
    from nac_engine.compiler.tokenizer import embed_tokenizer
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n")
    (tmp_path / "tokenizer_config.json").write_text('{"x": ' + "[" * 3000 + "]" * 3000 + "}")
    with pytest.raises(ValueError, match="levels deep"):
        embed_tokenizer(small_file(), str(tmp_path))


# --------------------------------------------------------------------------- a file shrinking underneath
def test_file_truncated_while_open_is_an_error_not_sigbus(tmp_path):
    """In a child process (a SIGBUS would kill the test runner): open, truncate the file in place
    the way another program would, then touch every weight and resource. The file is mapped (a
    smaller one is read whole, and the copy is not affected: test_whole_read.py)."""
    nac = small_file()
    nac.params[1].meta = TensorMeta(0, (2, 3 * 4096), 0)
    nac.params[1]._payload = np.ones((2, 3 * 4096), np.float32).tobytes()
    nac.rsrc = [Resource("notes.txt", _payload=b"x" * 10)]
    path = tmp_path / "big.nac"
    path.write_bytes(write(nac))
    script = textwrap.dedent(f"""
        import os
        from nac_engine import NacFormatError, read
        from nac_engine.format import reader
        reader.WHOLE_READ_MAX = 0
        nac = read({str(path)!r})
        os.truncate({str(path)!r}, 200)
        caught = []
        for p in nac.params.values():
            try:
                p.array().sum()
            except NacFormatError as e:
                caught.append(e.reason)
        try:
            nac.rsrc[0].data
        except NacFormatError as e:
            caught.append(e.reason)
        print(len(caught), caught[0])
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr)
    count, reason = r.stdout.split(" ", 1)
    assert int(count) == 2 and "changed on disk" in reason


def test_error_reasons_are_capped():
    e = NacFormatError("CNST", 4, "x" * 200_000)
    assert len(e.reason) < 1100 and "200,000 characters" in e.reason and len(str(e)) < 1200


def test_save_and_views_of_a_mapped_file_truncated_while_open_never_sigbus(tmp_path):
    """In a child process (SIGBUS would kill the runner): a file above the whole-read limit is
    mapped; another program truncates it; then a weight taken before (a copy, still usable), the
    byte view the hex pane reads, a save (write), a save with a new schedule (encode_with_schedule)
    and a resource each give a result or the one error type saying the file changed on disk."""
    nac = small_file()
    nac.params[1].meta = TensorMeta(0, (2, 3 * 4096), 0)
    nac.params[1]._payload = np.ones((2, 3 * 4096), np.float32).tobytes()
    nac.rsrc = [Resource("notes.txt", _payload=b"x" * 10)]
    path = tmp_path / "big.nac"
    path.write_bytes(write(nac))
    out = tmp_path / "saved.nac"
    script = textwrap.dedent(f"""
        import os
        from nac_engine import NacFormatError, read, write
        from nac_engine.compiler.replan import encode_with_schedule
        from nac_engine.format import reader
        reader.WHOLE_READ_MAX = 0
        nac = read({str(path)!r})
        held = nac.params[1].raw()
        size = len(nac.buffer)
        os.truncate({str(path)!r}, 200)
        results = [float(held.sum())]
        view = nac.buffer
        results.append(len(view[0:size]))          # the hex pane's read: shorter, not a crash
        results.append(view[size - 1])
        for name, fn in (("write", lambda: write(nac)), ("schedule", lambda: encode_with_schedule(nac, nac.mmap)),
                         ("resource", lambda: nac.rsrc[0].data), ("weight", lambda: nac.params[1].array())):
            try:
                fn()
                results.append(name + " ok")
            except NacFormatError as e:
                results.append(name + ": " + ("changed on disk" if "changed on disk" in e.reason else e.reason))
        import json
        print(json.dumps(results))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr)
    held_sum, shown, last, *saves = json.loads(r.stdout)
    assert held_sum == 2 * 3 * 4096 and shown == 200 and last == 0
    assert saves == ["write: changed on disk", "schedule: changed on disk", "resource: changed on disk",
                     "weight: changed on disk"], saves
