"""`nac dap` through a small Python DAP client (tests/dap/dap_client.py): the base protocol's
framing from both ends, sequence numbers, cancellation (pause) of a running action, a stream that
is not DAP, and requests the adapter must refuse without dying. The editors' own client drives
the same adapter in test_dap_node.py."""
from __future__ import annotations

import io
import subprocess
import sys

import pytest

from nac_engine.cli import main
from nac_engine.dap.adapter import Adapter
from nac_engine.dap.framing import MAX_CONTENT, ProtocolError, encode_message, read_message
from tests.dap.dap_client import DapClient
from tests.dap.fixture_models import NESTED, marker_line

# the session's DAP models (three compiles, ~6 s) are built on one worker, not on each
pytestmark = pytest.mark.xdist_group("node_modules")


@pytest.fixture
def models(dap_models):
    return dap_models


@pytest.fixture
def client():
    c = DapClient()
    yield c
    c.close()


# -- framing ----------------------------------------------------------------------------------------
def test_framing_reads_extra_headers_and_refuses_what_is_not_dap():
    body = b'{"seq":1,"type":"request","command":"threads"}'
    stream = io.BytesIO(b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    assert read_message(stream)["command"] == "threads"
    assert read_message(stream) is None                    # a clean end
    for raw, reason in [(b"Content-Length: 5\r\n\r\n{}", "ended after 2 of 5"),
                        (b"Content-Length: x\r\n\r\n", "not a number"),
                        (b"Content-Length: %d\r\n\r\n" % (MAX_CONTENT + 1), "outside"),
                        (b"Content-Length: 2\r\n\r\n[]", "not a JSON object"),
                        (b"Content-Length: 3\r\n\r\n{x}", "not UTF-8 JSON"),
                        (b"X-Other: 1\r\n\r\n{}", "without Content-Length"),
                        (b"garbage\r\n", "without ':'"),
                        (b"A: b\r\n" * 40, "more than 16 header lines")]:
        with pytest.raises(ProtocolError, match=reason):
            read_message(io.BytesIO(raw))


def test_an_editor_json_parser_never_sees_nan():
    """NaN/Infinity are not JSON: the adapter's messages are written with them refused, and the
    values it shows are text ('NaN 3' in a summary), so nothing it sends is refused."""
    with pytest.raises(ValueError):
        encode_message({"x": float("nan")})


def test_sequence_numbers_and_a_run_over_the_stdio_stream(client, models):
    src = str(models / "model.py")
    client.start({"program": str(models / "model.nac")}, breakpoints={src: [marker_line(NESTED, "softmax")]})
    assert client.stopped()["reason"] == "breakpoint"
    assert client.top()["line"] == marker_line(NESTED, "softmax")
    client.request("continue")
    client.stopped()
    client.request("setBreakpoints", {"source": {"path": src}, "breakpoints": []})
    client.request("continue")
    client.wait_event("terminated")
    assert client.protocol_errors == []                    # stdout carried protocol messages only
    seqs = [m["seq"] for m in client.received]
    assert seqs == list(range(1, len(seqs) + 1))           # the adapter's own numbering: 1, 2, 3, ...
    responses = [m for m in client.received if m["type"] == "response"]
    assert sorted(r["request_seq"] for r in responses) == list(range(1, client.seq + 1))
    assert all(r["success"] for r in responses)
    outputs = [m["body"]["output"] for m in client.received if m.get("event") == "output"]
    assert any(o.startswith("output 0: f32[2,4]") and "NaN" in o for o in outputs)


def test_pause_cancels_a_running_continue_between_two_instructions(client, models):
    client.start({"program": str(models / "slow.nac")})
    import time
    time.sleep(0.5)
    client.request("pause", {"threadId": 1})
    stop = client.stopped()
    assert stop["reason"] == "pause"
    tick = int(client.top()["instructionPointerReference"])
    from nac_engine import read
    with read(str(models / "slow.nac")) as nac:
        assert 0 < tick < len(nac.instructions) - 1       # in the middle: paused, not ended
    client.request("next", {"threadId": 1})
    client.stopped()
    assert int(client.top()["instructionPointerReference"]) == tick + 1
    client.request("stepBack", {"threadId": 1})
    client.stopped()
    assert int(client.top()["instructionPointerReference"]) == tick


def test_bad_requests_are_error_responses(client, models, tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"\x08\x07\x12\x07pytorch" + bytes(100))
    r = client.request("initialize", {"adapterID": "nac"})
    assert r["body"]["supportsStepBack"] and r["body"]["supportsDisassembleRequest"]
    for command, args, message in [
            ("launch", {}, "'program'"),
            ("launch", {"program": str(models / "absent.nac")}, "no such file"),
            ("launch", {"program": str(models)}, "is a directory"),
            ("launch", {"program": str(models / "model.nac"), "inputs": ["x"]}, "'inputs' must map"),
            ("launch", {"program": str(models / "model.nac"), "seed": "one"}, "'seed'"),
            ("launch", {"program": str(tmp_path / "model.onnx")}, "not a NAC file"),   # (a model.py compiles)
            ("next", {"threadId": 1}, "launch first"),
            ("evaluate", {"expression": "1"}, "launch first"),
            ("frobnicate", {}, "unsupported request"),
            ("launch", [], "'arguments' must be an object")]:
        seq = client.send(command, args)
        r = client.response(seq)
        assert not r["success"] and message in r["message"], (command, r)
    assert client.proc.poll() is None                      # still serving
    launched = client.start({"program": str(models / "model.nac"), "stopOnEntry": True})
    assert launched["success"]
    assert client.stopped()["reason"] == "entry"


def test_a_stream_that_is_not_dap_ends_the_adapter_with_a_reason():
    p = subprocess.run([sys.executable, "-m", "nac_engine.cli", "dap"], input=b"Content-Length: 7\r\n\r\nnotjson",
                       capture_output=True, timeout=120)
    assert p.returncode == 2
    assert p.stdout == b""                                 # no traceback on the protocol stream
    assert b"not UTF-8 JSON" in p.stderr and b"Traceback" not in p.stderr


def test_adapter_in_process_answers_every_request_once():
    """The adapter object itself (what `serve` wraps): one response per request, even for requests
    whose handler raises."""
    sent = []
    a = Adapter(sent.append)
    a.handle({"seq": 1, "type": "request", "command": "threads"})
    a.handle({"seq": 2, "type": "request", "command": "variables", "arguments": {"variablesReference": "x"}})
    a.handle({"seq": 3, "type": "request", "command": "__class__"})
    a.handle({"seq": 4, "type": "event", "event": "ignored"})
    a.handle({"seq": 5, "type": "request", "command": "disassemble", "arguments": {"memoryReference": "0"}})
    a.shutdown()
    assert [(m["request_seq"], m["success"]) for m in sent] == [(1, True), (2, False), (3, False), (5, False)]
    assert sent[0]["body"]["threads"] == [{"id": 1, "name": "model"}]


def test_arguments_of_the_wrong_kind_are_the_requests_error(models):
    """Arguments an editor should not send are the request's error, never an internal one:
    Python's json (and so the framing) reads the non-JSON constant Infinity, as a frame count,
    an instruction offset or a byte count; a Source that is a string or a number."""
    sent = []
    a = Adapter(sent.append)
    for seq, (command, args) in enumerate([
            ("initialize", {"adapterID": "nac"}),
            ("launch", {"program": str(models / "model.nac"), "stopOnEntry": True}),
            ("configurationDone", {}),
            ("stackTrace", {"threadId": 1, "levels": float("inf")}),
            ("disassemble", {"memoryReference": "0", "instructionOffset": float("-inf"), "instructionCount": 4}),
            ("readMemory", {"memoryReference": "param:head.proj.weight", "count": float("inf")}),
            ("source", {"source": "model.py"}),
            ("source", {"sourceReference": [1]}),
            ("gotoTargets", {"source": 7, "line": 3})], start=1):
        a.handle({"seq": seq, "type": "request", "command": command, "arguments": args})
    a.shutdown()
    answers = {m["request_seq"]: m for m in sent if m["type"] == "response"}
    assert all(answers[seq]["success"] for seq in (1, 2, 3))
    for seq in (4, 5, 6):
        assert not answers[seq]["success"]
        assert "internal error" not in answers[seq]["message"] and "infinity" in answers[seq]["message"]
    # a Source that is not an object, a reference that is not a number: said so
    assert [answers[seq]["message"] for seq in (7, 8, 9)] == [
        "source: 'source' must be an object, not 'model.py'", "source: 'sourceReference' must be an integer, not [1]",
        "gotoTargets: 'source' must be an object, not 7"]
    assert not any(m.get("event") == "output" and "Traceback" in m["body"]["output"] for m in sent)


def test_a_long_run_reports_progress_to_a_client_that_asks(client, models):
    client.request("initialize", {"adapterID": "nac", "supportsProgressReporting": True})
    client.request("launch", {"program": str(models / "slow.nac")})
    client.wait_event("initialized")
    client.request("configurationDone")
    start = client.wait_event("progressStart")["body"]
    assert start["title"] == "Running" and 0 < start["percentage"] < 100
    client.request("terminate")                            # the run is cancelled between two instructions
    end = client.wait_event("progressEnd")["body"]
    assert end["progressId"] == start["progressId"]
    client.wait_event("terminated")


def test_sources_not_on_disk_come_from_the_recorded_lines(client, models, tmp_path):
    src = tmp_path / "elsewhere.py"
    src.write_text(NESTED)
    assert main(["compile", str(src), "-o", str(tmp_path / "m.nac")]) == 0
    src.unlink()                                           # the user's file is gone (another machine)
    line = marker_line(NESTED, "softmax")
    client.start({"program": str(tmp_path / "m.nac")}, functions=["aten.softmax*"])
    client.stopped()
    frame = client.top()
    assert frame["line"] == line and "path" not in frame["source"]
    ref = frame["source"]["sourceReference"]
    text = client.request("source", {"sourceReference": ref, "source": frame["source"]})["body"]["content"]
    assert text.splitlines()[line - 1].strip() == NESTED.splitlines()[line - 1].strip()
    # a breakpoint set on that source (by its reference) maps to its ticks
    bp = client.request("setBreakpoints", {"source": frame["source"], "breakpoints": [{"line": line}]})
    assert bp["body"]["breakpoints"][0]["verified"]


def test_a_source_edited_since_the_compile_shows_and_breaks_at_its_lines_now(client, tmp_path):
    """The editor shows the file as it is now: frames name the recorded lines where they stand
    now, and a breakpoint on such a line (as the editor numbers it) is verified and hit."""
    src = tmp_path / "edited.py"
    src.write_text(NESTED)
    assert main(["compile", str(src), "-o", str(tmp_path / "m.nac")]) == 0
    edited = "# two lines the user added\n\n" + NESTED
    src.write_text(edited)
    softmax, head_call = marker_line(edited, "softmax"), marker_line(edited, "head-call")
    assert softmax == marker_line(NESTED, "softmax") + 2
    client.start({"program": str(tmp_path / "m.nac")}, breakpoints={str(src): [softmax]})
    # the debug console says why the lines are not the recorded ones (once, when the breakpoint
    # is mapped, before the run stops on it)
    told = client.wait_event("output")
    while "has changed since" not in told["body"]["output"]:
        told = client.wait_event("output")
    assert str(src) in told["body"]["output"] and "m.nac" in told["body"]["output"]
    client.stopped()
    frames = client.request("stackTrace", {"threadId": 1})["body"]["stackFrames"]
    assert frames[0]["line"] == softmax and frames[0]["source"]["path"] == str(src)
    assert any(f["line"] == head_call for f in frames[1:])


def test_logpoints_print_their_message_and_do_not_stop(client, models):
    """A breakpoint with a logMessage (print-debugging without editing the model): each pass
    prints the message with its {expressions} evaluated there, and the run does not stop; a
    hit condition thins it out; a bad message is an unverified breakpoint saying why."""
    src = str(models / "model.py")
    body, softmax, log = marker_line(NESTED, "body"), marker_line(NESTED, "softmax"), marker_line(NESTED, "log")
    client.request("initialize", {"adapterID": "nac", "linesStartAt1": True, "columnsStartAt1": True})
    caps = client.request("initialize", {"adapterID": "nac"}, ok=False)
    client.request("launch", {"program": str(models / "model.nac")})
    client.wait_event("initialized")
    answer = client.request("setBreakpoints", {"source": {"path": src}, "breakpoints": [
        {"line": body, "logMessage": "body max {max(abs(x))} rows {shape(x)[0]} {{literal}}"},
        {"line": softmax, "logMessage": "softmax {x[0, :2]}", "hitCondition": "2"},
        {"line": log, "logMessage": "oops {x[]}"},
        {"line": log}]})["body"]["breakpoints"]
    assert [b["verified"] for b in answer] == [True, True, False, True]
    assert "log message" in answer[2]["message"] and "expected an index" in answer[2]["message"]
    client.request("configurationDone")
    lines = []
    while (msg := client.events.get(timeout=60)).get("event") != "stopped":
        if msg.get("event") == "output" and msg["body"].get("category") == "console":
            lines.append(msg["body"]["output"])
    assert msg["body"]["reason"] == "breakpoint" and client.top()["line"] == log     # the plain breakpoint
    logged = [ln for ln in lines if ln.startswith(("body ", "softmax "))]
    assert len(logged) >= 2 and logged[0].startswith("body max ") and logged[0].endswith(" rows 2 {literal}\n"), lines
    float(logged[0].split()[2])                                  # a number, not a tensor's text
    # the softmax line is one linear then the softmax: hit 2 is the softmax's result
    assert any(ln.startswith("softmax f32[2] [") for ln in logged), logged        # a short vector: its values
    assert caps["body"].get("supportsLogPoints") is True


@pytest.mark.heavy       # a compile in a fresh `nac dap` process: 9-14 s
def test_launch_imports_the_code_of_the_programs_custom_operators(client, tmp_path):
    """`imports` in the launch configuration: the code that registers the model's torch.library
    operators, imported by the adapter before the run; a bad entry is the launch's error."""
    from tests.studio.test_custom_operators import MODEL, OPS
    (tmp_path / "ops.py").write_text(OPS)
    (tmp_path / "model.py").write_text(MODEL)
    r = subprocess.run([sys.executable, "-m", "nac_engine.cli", "compile", str(tmp_path / "model.py"), "-o",
                        str(tmp_path / "m.nac")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    bad = client.start({"program": str(tmp_path / "m.nac"), "imports": [str(tmp_path / "nosuch.py")]})
    assert not bad["success"] and "imports" in bad["message"] and "no such file" in bad["message"]
    launched = client.start({"program": str(tmp_path / "m.nac"), "imports": [str(tmp_path / "ops.py")]})
    assert launched["success"], launched
    client.wait_event("terminated")            # ran to the end through the custom op


def test_the_debug_console_completes_functions_parameters_and_the_ticks_values(client, models):
    """``completions`` (the debug console's): a function with its bracket, a parameter's dotted
    name from its first letters, the values the tick at hand reads as ``vN``; each target
    replaces what was typed before the (1-based) column; nothing inside a number."""
    src = str(models / "model.py")
    client.start({"program": str(models / "model.nac")}, breakpoints={src: [marker_line(NESTED, "softmax")]})
    client.stopped()
    caps_text = "max(abs(he"
    got = client.request("completions", {"text": caps_text, "column": len(caps_text) + 1})["body"]["targets"]
    assert [t["label"] for t in got] == ["head.proj.bias", "head.proj.weight"]
    assert all(t["start"] == 9 and t["length"] == 2 and t["type"] == "variable" for t in got)
    got = client.request("completions", {"text": "me", "column": 3})["body"]["targets"]
    assert got[0]["label"] == "mean(" and got[0]["type"] == "function"
    tick = int(client.top()["instructionPointerReference"])
    got = {t["label"] for t in client.request("completions", {"text": "v", "column": 2})["body"]["targets"]}
    assert f"v{tick}" in got and len(got) >= 2            # its result and what it reads
    assert client.request("completions", {"text": "1e", "column": 3})["body"]["targets"] == []
    bad = client.request("completions", {"text": "x"}, ok=False)
    assert not bad["success"] and "'column'" in bad["message"]


def test_a_launch_cwd_resolves_the_configurations_relative_paths(models, tmp_path):
    """``cwd`` (an editor's project directory): the program, a .py import and an .npy input given
    relative to it are found wherever the adapter was started; a cwd that is no directory is refused."""
    import numpy as np
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    np.save(models / "x_cwd.npy", np.ones((2, 6), np.float32))
    (models / "noop_ops.py").write_text("IMPORTED = True\n")
    client = DapClient(cwd=str(elsewhere))
    try:
        launched = client.start({"program": "model.nac", "cwd": str(models), "stopOnEntry": True,
                                 "inputs": {"x": "x_cwd.npy"}, "imports": ["noop_ops.py"]})
        assert launched["success"], launched.get("message")
        client.stopped()
        scopes = client.request("scopes", {"frameId": client.top()["id"]})["body"]["scopes"]
        inputs = next(s for s in scopes if s["name"].startswith("Inputs"))
        x = client.request("variables", {"variablesReference": inputs["variablesReference"]})["body"]["variables"][0]
        assert x["value"].startswith("f32[2,6] min 1 max 1"), x
    finally:
        client.close()
    client = DapClient(cwd=str(elsewhere))
    try:
        r = client.start({"program": "model.nac", "cwd": str(tmp_path / "nowhere")})
        assert not r["success"] and "'cwd'" in r["message"] and "is not a directory" in r["message"]
    finally:
        client.close()


def test_a_mind_program_is_debugged_as_its_nac_with_breakpoints_on_its_lines(tmp_path):
    """``program: model.ir`` (what nac run takes): converted in memory, its frames are the .ir's
    own lines and a breakpoint set on one of them stops there."""
    ir = tmp_path / "net.ir"
    ir.write_bytes(b'%0 = Input() {name: "x"} : Tensor<f32, [2, 3]>\n%1 = Relu(%0) : Tensor<f32, [2, 3]>\n'
                   b'%2 = BinOp(Mul, %1, %1) : Tensor<f32, [2, 3]>\noutputs: %2\n')
    client = DapClient()
    try:
        launched = client.start({"program": str(ir), "inputs": {"x": "2x3:float32"}}, breakpoints={str(ir): [3]})
        assert launched["success"], launched.get("message")
        assert client.stopped()["reason"] == "breakpoint"
        top = client.top()
        assert top["line"] == 3 and top["source"]["path"] == str(ir)
        said = [m["body"]["output"] for m in client.received if m.get("event") == "output"]
        assert any("a mind program, converted to NAC in memory" in o for o in said), said
        client.request("continue", {"threadId": 1})
        client.wait_event("terminated")
    finally:
        client.close()


def test_an_input_given_or_set_as_its_values(models):
    """A launch's ``inputs`` and the Inputs scope's setVariable take the values themselves."""
    client = DapClient()
    try:
        launched = client.start({"program": str(models / "model.nac"), "stopOnEntry": True,
                                 "inputs": {"x": "[[1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 0]]"}})
        assert launched["success"], launched.get("message")
        client.stopped()

        def input_x():
            scopes = client.request("scopes", {"frameId": client.top()["id"]})["body"]["scopes"]
            ref = next(s for s in scopes if s["name"].startswith("Inputs"))["variablesReference"]
            return ref, client.request("variables", {"variablesReference": ref})["body"]["variables"][0]
        _, x = input_x()
        assert x["value"].startswith("f32[2,6] min 0 max 6"), x       # float32: the file records it so
        ref, _ = input_x()
        set_ = client.request("setVariable", {"variablesReference": ref, "name": "x", "value": "[" + "2, " * 11 + "2]"})
        assert set_["body"]["value"].startswith("f32[2,6] min 2 max 2"), set_      # 12 values take its shape
        bad = client.request("setVariable", {"variablesReference": ref, "name": "x", "value": "[1, [2]]"}, ok=False)
        assert not bad["success"] and bad["message"].startswith("setVariable: x: values: ")
        # a value of another shape is refused, and the run goes on with the one it had
        bad = client.request("setVariable", {"variablesReference": ref, "name": "x", "value": "3x3:float32"}, ok=False)
        assert not bad["success"] and "expects 2x6 float32, got 3x3" in bad["message"]
        _, x = input_x()
        assert x["value"].startswith("f32[2,6] min 2 max 2"), x
        client.request("next", {"threadId": 1})
        client.stopped()
    finally:
        client.close()


def test_evaluate_takes_a_parameter_named_like_a_tick(tmp_path):
    """``v1.weight`` is a parameter (a module called v1), not tick 1's value: evaluate reads the
    expression as the language does (it rewrote v1 to t1 before, and failed)."""
    import torch

    import nac_engine
    from nac_engine.compiler.external import write_compiled

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.v1 = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.v1(x)
    torch.manual_seed(0)
    m = M().eval()
    write_compiled(nac_engine.compile(m, (torch.randn(1, 3),)), str(tmp_path / "m.nac"))
    client = DapClient()
    try:
        assert client.start({"program": str(tmp_path / "m.nac"), "stopOnEntry": True})["success"]
        client.stopped()
        got = client.request("evaluate", {"expression": "max(abs(v1.weight))", "context": "repl"})["body"]
        assert float(got["result"]) == pytest.approx(float(m.v1.weight.detach().abs().max()), rel=1e-6)
        client.request("next", {"threadId": 1})
        client.stopped()
        assert client.request("evaluate", {"expression": "v0", "context": "watch"})["body"]["result"].startswith("f32[1,3]")
    finally:
        client.close()


def test_loaded_sources_list_the_models_code_and_the_disassembly(client, models):
    client.start({"program": str(models / "model.nac"), "stopOnEntry": True})
    client.stopped()
    caps = client.request("initialize", {"adapterID": "nac"}, ok=False)
    sources = client.request("loadedSources", {})["body"]["sources"]
    paths = [s.get("path") for s in sources]
    assert str(models / "model.py") in paths
    assert sources[-1]["sourceReference"] and "disassembly" in sources[-1]["name"]
    assert caps["body"].get("supportsLoadedSourcesRequest") is True


@pytest.mark.heavy       # a compile in a fresh `nac dap` process: 9-14 s
def test_a_model_py_program_is_compiled_beside_it_then_debugged_at_its_lines(tmp_path):
    """``program: model.py`` (an editor's F5 on the model's own file): `nac compile` writes model.nac
    beside it, in a process of its own (nothing it prints reaches the protocol's stream), and the
    run stops at a breakpoint on the file's line; `compileArgs` pass options; a model that does not
    compile is the launch's error, file:line first."""
    model = tmp_path / "model.py"
    model.write_text(NESTED)
    line = marker_line(NESTED, "softmax")
    client = DapClient(cwd=str(tmp_path))
    try:
        launched = client.start({"program": "model.py", "cwd": str(tmp_path), "compileArgs": ["--quant", "fp16"]},
                                breakpoints={str(model): [line]})
        assert launched["success"], launched.get("message")
        assert client.stopped()["reason"] == "breakpoint" and client.top()["line"] == line
        assert client.protocol_errors == []
        outputs = "".join(m["body"]["output"] for m in client.received if m.get("event") == "output")
        assert f"nac compile {model} --quant fp16 -o {tmp_path / 'model.nac'}" in outputs and "compiled model.py in" in outputs
        from nac_engine.format.reader import read
        with read(str(tmp_path / "model.nac")) as nac:
            assert nac.header.quant_name == "FP16"
    finally:
        client.close()
    # F5 again with nothing changed: the .nac is up to date, and is debugged without a compile
    client = DapClient(cwd=str(tmp_path))
    try:
        launched = client.start({"program": "model.py", "cwd": str(tmp_path), "compileArgs": ["--quant", "fp16"]},
                                breakpoints={str(model): [line]})
        assert launched["success"] and client.stopped()["reason"] == "breakpoint"
        outputs = "".join(m["body"]["output"] for m in client.received if m.get("event") == "output")
        assert "model.nac is up to date with model.py" in outputs and f"nac compile {model}" not in outputs
    finally:
        client.close()
    (tmp_path / "broken.py").write_text("import torch\n\ndef make_model(:\n    pass\n")
    client = DapClient(cwd=str(tmp_path))
    try:
        r = client.start({"program": str(tmp_path / "broken.py")})
        assert not r["success"] and f"{tmp_path / 'broken.py'}:3: syntax error" in r["message"], r["message"]
        assert not (tmp_path / "broken.nac").exists()
        r = client.start({"program": str(tmp_path / "model.py"), "compileArgs": "--quant fp16"})
        assert not r["success"] and "'compileArgs'" in r["message"]
        (tmp_path / "bare.py").write_text("import torch\n\ndef make_model():\n    return torch.nn.Linear(4, 2)\n")
        r = client.start({"program": str(tmp_path / "bare.py")})
        assert not r["success"] and '"compileArgs": ["--input"' in r["message"], r["message"]
    finally:
        client.close()


@pytest.mark.heavy       # a compile in a fresh `nac dap` process: 9-14 s
def test_a_hugging_face_folder_program_is_compiled_with_hf_then_debugged(tmp_path):
    """``program: ./my-bert`` (a model's folder): `nac compile --hf` writes my-bert.nac beside it."""
    import json
    folder = tmp_path / "my-bert"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(dict(
        model_type="bert", vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32)))
    client = DapClient(cwd=str(tmp_path))
    try:
        launched = client.start({"program": str(folder), "compileArgs": ["--seq-len", "6"], "stopOnEntry": True})
        assert launched["success"], launched.get("message")
        assert client.stopped()["reason"] == "entry"
        outputs = "".join(m["body"]["output"] for m in client.received if m.get("event") == "output")
        assert f"nac compile --hf {folder} --seq-len 6 -o {tmp_path / 'my-bert.nac'}" in outputs
        assert (tmp_path / "my-bert.nac").is_file()
    finally:
        client.close()


def test_a_model_program_is_compiled_again_only_when_something_it_was_built_from_changed(tmp_path, monkeypatch):
    """As a build tool: the same arguments and no newer source reuse the .nac; other arguments, a
    sibling module saved since, a .nac rewritten or its weights removed, or ``recompile`` compile again."""
    import os
    import subprocess as sp

    from nac_engine.dap import model_program
    compiles = []

    def fake_compile(argv, **_kw):            # the real `nac compile` is the test above's
        out = argv[argv.index("-o") + 1]
        compiles.append(argv[argv.index("compile") + 1:argv.index("-o")])
        with open(out, "wb") as fh:
            fh.write(b"NAC")
        if "external" in argv:
            with open(out[:-4] + ".safetensors", "wb") as fh:
                fh.write(b"weights")
        return sp.CompletedProcess(argv, 0, f"{out}: 3 bytes", "")
    monkeypatch.setattr(model_program.subprocess, "run", fake_compile)
    model, helper = tmp_path / "model.py", tmp_path / "layers.py"
    model.write_text("def make_model(): ...\n")
    helper.write_text("")
    old = os.stat(model).st_mtime - 10
    for p in (model, helper):
        os.utime(p, (old, old))

    def launch(extra=(), recompile=False):
        said = []
        model_program.compile_model_program(str(model), None, list(extra), said.append, recompile=recompile)
        return said
    records = tmp_path / "cache" / "nac" / "dap-compiles.json"
    records.parent.mkdir(parents=True)
    records.write_text("[" * 200_000)                      # a damaged record file: as if there were none
    launch()
    assert "is up to date" in launch()[0] and len(compiles) == 1
    launch(["--quant", "fp16"])
    assert len(compiles) == 2 and compiles[-1][-2:] == ["--quant", "fp16"]
    launch(["--quant", "fp16"])
    assert len(compiles) == 2
    launch(["--quant", "fp16"], recompile=True)
    assert len(compiles) == 3
    helper.write_text("# saved since\n")                  # a sibling module the model imports
    launch(["--quant", "fp16"])
    assert len(compiles) == 4
    (tmp_path / "model.nac").write_bytes(b"NAC, rewritten")   # someone else wrote the .nac
    launch(["--quant", "fp16"])
    assert len(compiles) == 5
    launch(["--quant", "fp16"])
    assert len(compiles) == 5
    launch(["--weights", "external"])
    launch(["--weights", "external"])
    assert len(compiles) == 6
    (tmp_path / "model.safetensors").unlink()               # the weights the .nac needs are gone
    launch(["--weights", "external"])
    assert len(compiles) == 7 and (tmp_path / "model.safetensors").is_file()
    # a Hugging Face folder: every file in it counts, but not the .nac (and weights) written into it
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    os.utime(folder / "config.json", (old, old))
    for _ in range(2):
        model_program.compile_model_program(str(folder), str(folder / "tiny.nac"), [], lambda _t: None)
    assert len(compiles) == 8 and compiles[-1][:2] == ["--hf", str(folder)]
    (folder / "model.safetensors").write_bytes(b"new weights")
    model_program.compile_model_program(str(folder), str(folder / "tiny.nac"), [], lambda _t: None)
    assert len(compiles) == 9
