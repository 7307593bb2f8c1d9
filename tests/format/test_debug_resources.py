"""This project's two RSRC extensions: the input signature and the source map (round trip through a
written file, deterministic inputs, hostile payloads rejected with NacFormatError at the resource)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nac_engine.errors import NacFormatError
from nac_engine.format import read, write
from nac_engine.format.input_signature import (RESOURCE_NAME as SIG, InputSpec, encode_input_signature, find_resource,
                                               make_inputs, read_input_signature, set_input_signature)
from nac_engine.format.model import NacFile, Resource
from nac_engine.format.source_map import (RESOURCE_NAME as SMAP, RELOCATE_WINDOW, SourceEntry,
                                          find_recorded_line, locate_source, read_source_map,
                                          set_source_map)

SPECS = [InputSpec("input_ids", (1, 16), "int64", "input", 0.0, 99.0),
         InputSpec("mask", (1, 16), "bool"),
         InputSpec("x", (2, 3), "float32", "input", -1.5, 2.0),
         InputSpec("noise", (4,), "float16"),
         InputSpec("token_type_ids", (1, 16), "int32", "buffer", 0.0, 0.0)]


def _with(name: str, payload: bytes) -> NacFile:
    return NacFile(rsrc=[Resource("vocab.txt", _payload=b"a\n"), Resource(name, _payload=payload)])


def test_signature_round_trips_through_a_written_file(tmp_path):
    nac = NacFile()
    assert read_input_signature(nac) is None
    set_input_signature(nac, SPECS)
    set_input_signature(nac, SPECS)              # replaced, not duplicated
    assert [r.name for r in nac.rsrc] == [SIG]
    write(nac, str(tmp_path / "s.nac"))
    back = read(str(tmp_path / "s.nac"))
    assert read_input_signature(back) == SPECS
    assert encode_input_signature(SPECS) == encode_input_signature(list(SPECS))


def test_make_inputs_is_deterministic_and_respects_ranges():
    a, b = make_inputs(SPECS, seed=3), make_inputs(SPECS, seed=3)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["x"], make_inputs(SPECS, seed=4)["x"])
    assert a["input_ids"].dtype == np.int64 and a["input_ids"].min() >= 0 and a["input_ids"].max() <= 99
    assert len(np.unique(a["input_ids"])) > 1
    assert a["x"].dtype == np.float32 and a["x"].min() >= -1.5 and a["x"].max() <= 2.0
    assert a["mask"].dtype == bool and a["noise"].dtype == np.float16
    assert (a["token_type_ids"] == 0).all() and a["token_type_ids"].dtype == np.int32
    # one stream per input: adding an input does not change the others' values
    assert np.array_equal(make_inputs(SPECS[:1], seed=3)["input_ids"], a["input_ids"])
    z, o = make_inputs(SPECS, fill="zeros"), make_inputs(SPECS, fill="ones")
    assert all((v == 0).all() for v in z.values()) and all((v == 1).all() for v in o.values())
    with pytest.raises(ValueError):
        make_inputs(SPECS, fill="gaussian")


@pytest.mark.parametrize("payload, reason", [
    (b"\xff\xfe", "UTF-8"),
    (b"{nope", "JSON"),
    (b"[1, 2]", "object"),
    (b'{"version": 2, "inputs": []}', "version"),
    (b'{"version": 1}', "inputs"),
    (b'{"version": 1, "inputs": [3]}', "not an object"),
    (b'{"version": 1, "inputs": [{"name": "x", "shape": [1], "dtype": "float32", "kind": "input", "low": NaN}]}',
     "finite"),
    (b'{"version": 1, "inputs": [{"name": "x", "shape": [-1], "dtype": "float32"}]}', "dimensions"),
    (b'{"version": 1, "inputs": [{"name": "x", "shape": [1.5], "dtype": "float32"}]}', "integers"),
    (b'{"version": 1, "inputs": [{"name": "x", "shape": [1], "dtype": "object"}]}', "dtype"),
    (b'{"version": 1, "inputs": [{"name": "x", "shape": [1], "dtype": "int8", "kind": "weird"}]}', "kind"),
    (b'{"version": 1, "inputs": [{"name": "", "shape": [1], "dtype": "int8"}]}', "name"),
    (b'{"version": 1, "inputs": [{"name": "x", "shape": [65536, 65536, 65536], "dtype": "int8"}]}', "elements"),
    (b'{"version": 1, "inputs": [{"name": "x", "shape": ' + json.dumps([1] * 17).encode() + b', "dtype": "int8"}]}',
     "dimensions"),
    (b'{"version": 1, "inputs": [{"name": "x", "shape": [1], "dtype": "int8", "low": 5, "high": 1}]}', "above"),
    (b"[" * 100000 + b"]" * 100000, "nested"),
])
def test_hostile_signature_is_a_format_error_at_the_resource(tmp_path, payload, reason):
    write(_with(SIG, payload), str(tmp_path / "h.nac"))
    nac = read(str(tmp_path / "h.nac"))
    res = nac.rsrc[1]
    with pytest.raises(NacFormatError) as e:
        read_input_signature(nac)
    assert e.value.section == "RSRC" and res.data_offset <= e.value.offset <= res.data_offset + len(payload)
    assert reason.lower() in e.value.reason.lower()


def test_inputs_adding_up_past_the_total_budget_are_refused():
    one = {"name": "x", "shape": [1 << 14, 1 << 14], "dtype": "float64"}      # 2 GiB alone is allowed...
    items = [dict(one, name=f"x{i}") for i in range(2)]                          # ...two are not
    payload = json.dumps({"version": 1, "inputs": items}).encode()
    with pytest.raises(NacFormatError, match="add up to"):
        read_input_signature(_with(SIG, payload))
    with pytest.raises(ValueError, match="add up to"):
        make_inputs([InputSpec(f"x{i}", (1 << 14, 1 << 14), "float64") for i in range(2)])


def test_oversized_resources_are_refused_before_decoding(monkeypatch):
    import nac_engine.format.input_signature as S
    monkeypatch.setattr(S, "MAX_PAYLOAD_BYTES", 16)
    with pytest.raises(NacFormatError, match="at most 16"):
        read_input_signature(_with(SIG, b'{"version": 1, "inputs": []}'))


ENTRIES = [SourceEntry(0, "", "x"), SourceEntry(1, "fc", "fc.weight"),
           SourceEntry(3, "fc", "linear", "pkg/model.py", 12, "        return self.fc(x)"),
           SourceEntry(4, "head.act", "softmax", "pkg/model.py", 20, "    y = torch.softmax(z, -1)  # ünïcode")]


def test_source_map_round_trips_and_groups_modules(tmp_path):
    nac = NacFile()
    assert read_source_map(nac) is None
    set_source_map(nac, reversed(ENTRIES))
    write(nac, str(tmp_path / "m.nac"))
    smap = read_source_map(read(str(tmp_path / "m.nac")))
    assert smap.entries == ENTRIES
    assert smap.entry(3).location == "pkg/model.py:12" and smap.entry(2) is None
    assert smap.modules() == {"": [0], "fc": [1, 3], "head.act": [4]}
    payload = json.loads(nac.rsrc[0].data)
    assert payload["files"] == ["pkg/model.py"]          # a path is stored once


def test_a_version_1_source_map_still_reads_and_version_2_keeps_stacks():
    from nac_engine.format.model import Resource
    from nac_engine.format.source_map import RESOURCE_NAME
    v1 = b'{"version": 1, "files": ["pkg/model.py"], "entries": [[3, "fc", "linear", 0, 12, "x = self.fc(x)"]]}'
    nac = NacFile()
    nac.rsrc = [Resource(RESOURCE_NAME, _payload=v1)]
    e = read_source_map(nac).entry(3)
    assert (e.file, e.line, e.stack) == ("pkg/model.py", 12, ())
    stack = (("Net.forward", "pkg/model.py", 30, "    y = self.block(x)"), ("block (Block.forward)", "pkg/model.py", 12,
                                                                           "x = self.fc(x)"))
    set_source_map(nac, [SourceEntry(3, "block.fc", "linear", "pkg/model.py", 12, "x = self.fc(x)", stack)])
    payload = json.loads(nac.rsrc[0].data)
    assert payload["version"] == 2 and payload["files"] == ["pkg/model.py"] and len(payload["frames"]) == 2
    assert read_source_map(nac).entry(3).stack == stack


def test_source_map_is_decoded_once_per_resource_entry(tmp_path):
    """Three Studio panes read the map as a file opens: one decode, one shared object; a
    replaced entry is decoded again. Also for a file read from disk, whose RSRC entries are
    made from the section's bytes when looked up (each lookup made a new entry, so every pane
    decoded the map again: 10 ms each on the 48-layer GPT-2, inside the open's one event)."""
    nac = NacFile()
    set_source_map(nac, ENTRIES)
    first = read_source_map(nac)
    assert read_source_map(nac) is first
    set_source_map(nac, ENTRIES[:2])
    again = read_source_map(nac)
    assert again is not first and again.entries == ENTRIES[:2]
    write(nac, str(tmp_path / "m.nac"))
    back = read(str(tmp_path / "m.nac"))
    first = read_source_map(back)
    assert read_source_map(back) is first and first.entries == ENTRIES[:2]
    assert list(back.rsrc)[0] is find_resource(back, SMAP)       # the list, once made, holds the same entry


@pytest.mark.parametrize("payload, reason", [
    (b'{"version": 2, "files": ["a.py"], "entries": [[0, "", "x", null, null, null]], "frames": [["f", 5, 1, ""]],'
     b' "stacks": [[0]]}', "frames[0]"),
    (b'{"version": 2, "files": ["a.py"], "entries": [[0, "", "x", null, null, null]], "frames": [["f", 0, 1, ""]],'
     b' "stacks": [[1]]}', "stacks[0]"),
    (b'{"version": 2, "files": [], "entries": [], "frames": [], "stacks": [null]}', "one entry per row"),
    (b'{"version": 1, "files": "x", "entries": []}', "files"),
    (b'{"version": 1, "files": [], "entries": {}}', "entries"),
    (b'{"version": 1, "files": [], "entries": [[0, "", "x"]]}', "tick, module"),
    (b'{"version": 1, "files": [], "entries": [[-1, "", "x", null, null, null]]}', "tick"),
    (b'{"version": 1, "files": [], "entries": [[0, 5, "x", null, null, null]]}', "module"),
    (b'{"version": 1, "files": [], "entries": [[0, "", "x", 0, null, null]]}', "file index"),
    (b'{"version": 1, "files": ["a.py"], "entries": [[0, "", "x", 0, 0, null]]}', "line"),
    (b'{"version": 1, "files": [1], "entries": []}', "strings"),
])
def test_hostile_source_map_is_a_format_error(payload, reason):
    with pytest.raises(NacFormatError) as e:
        read_source_map(_with(SMAP, payload))
    assert e.value.section == "RSRC" and reason in e.value.reason


def test_source_map_ticks_must_be_instructions():
    from nac_engine.format.model import Instruction
    nac = _with(SMAP, b'{"version": 1, "files": [], "entries": [[5, "", "x", null, null, null]]}')
    nac.instructions = [Instruction(0, 2, 0, None, None)]
    with pytest.raises(NacFormatError, match="instruction index"):
        read_source_map(nac)


def test_locate_source_only_finds_python_files_without_parent_steps(tmp_path):
    (tmp_path / "proj" / "pkg").mkdir(parents=True)
    (tmp_path / "proj" / "pkg" / "model.py").write_text("x = 1\n")
    (tmp_path / "proj" / "models").mkdir()
    near = tmp_path / "proj" / "models" / "m.nac"
    assert locate_source("pkg/model.py", str(near)) == str(tmp_path / "proj" / "pkg" / "model.py")
    assert locate_source("../proj/pkg/model.py", str(near)) is None
    assert locate_source("etc/passwd", str(near)) is None
    assert locate_source(None, str(near)) is None
    assert locate_source("json/decoder.py").endswith("decoder.py")       # the standard library


def test_a_recorded_line_is_found_where_it_stands_in_a_changed_file():
    lines = ["import torch", "", "def f(x):", "    y = torch.relu(x)", "    return y * 2"]
    assert find_recorded_line(lines, 4, "y = torch.relu(x)") == 4            # unchanged (indentation aside)
    assert find_recorded_line(lines, 4, None) == 4                            # nothing recorded to compare
    moved = ["# new"] * 7 + lines
    assert find_recorded_line(moved, 4, "    y = torch.relu(x)") == 11
    assert find_recorded_line(lines[2:], 4, "y = torch.relu(x)") == 2        # lines removed above it
    # the nearest of two copies; a rewritten line is not found; nor one past the window
    twice = lines + ["", "def g(x):", "    y = torch.relu(x)"]
    assert find_recorded_line(twice, 7, "y = torch.relu(x)") == 8
    assert find_recorded_line(lines, 4, "y = torch.sigmoid(x)") is None
    far = ["#"] * (RELOCATE_WINDOW + 5) + lines
    assert find_recorded_line(far, 4, "y = torch.relu(x)") is None
