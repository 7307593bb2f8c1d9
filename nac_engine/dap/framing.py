"""The Debug Adapter Protocol's base protocol: a message is a header block (``Content-Length: N``
and optional other ``Name: value`` lines, each ending in CRLF), an empty line, then N bytes of
UTF-8 JSON. The Studio's engine host speaks the same framing, so one reader serves both.

The peer may be hostile or broken (an editor's bug, a host killed mid-write): headers are bounded,
the length is checked before anything is read, and every failure is one :class:`ProtocolError`.
"""
from __future__ import annotations

import json
from typing import Any, BinaryIO, Optional

#: Longest header line accepted, and most header lines in one message.
MAX_HEADER_LINE = 1024
MAX_HEADER_LINES = 16
#: Largest JSON body accepted (large arrays never travel in JSON: see the host's array files).
MAX_CONTENT = 64 << 20


class ProtocolError(Exception):
    """The byte stream is not a DAP message stream (bad header, bad length, bad JSON)."""


def encode_message(message: dict, *, allow_nan: bool = False) -> bytes:
    """``allow_nan``: write NaN/Infinity as Python's json does (the engine host, whose peer is
    Python); an editor's JSON parser refuses them, so ``nac dap`` leaves it off."""
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_message(stream: BinaryIO) -> Optional[dict]:
    """The next message, or None at a clean end of stream (EOF before any header byte)."""
    length = None
    for count in range(MAX_HEADER_LINES + 1):
        line = stream.readline(MAX_HEADER_LINE + 1)
        if not line:
            if count == 0:
                return None
            raise ProtocolError("the stream ended inside a header")
        if len(line) > MAX_HEADER_LINE:
            raise ProtocolError(f"a header line longer than {MAX_HEADER_LINE} bytes")
        if line in (b"\r\n", b"\n"):
            break
        name, sep, value = line.decode("ascii", "replace").partition(":")
        if not sep:
            raise ProtocolError(f"a header line without ':' ({line[:40]!r})")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                raise ProtocolError(f"Content-Length {value.strip()[:20]!r} is not a number") from None
    else:
        raise ProtocolError(f"more than {MAX_HEADER_LINES} header lines")
    if length is None:
        raise ProtocolError("a message without Content-Length")
    if not 0 <= length <= MAX_CONTENT:
        raise ProtocolError(f"Content-Length {length} is outside 0..{MAX_CONTENT}")
    body = stream.read(length)
    if len(body) != length:
        raise ProtocolError(f"the stream ended after {len(body)} of {length} body bytes")
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError(f"the body is not UTF-8 JSON ({e})") from None
    if not isinstance(message, dict):
        raise ProtocolError("the body is not a JSON object")
    return message


def response(request: dict, seq: int, body: Any = None, *, success: bool = True,
             message: Optional[str] = None) -> dict:
    """The response to ``request`` (DAP's Response message)."""
    out = {"seq": seq, "type": "response", "request_seq": request.get("seq", 0), "success": success,
           "command": request.get("command", "")}
    if message is not None:
        out["message"] = message
    if body is not None:
        out["body"] = body
    return out


def event(name: str, seq: int, body: Any = None) -> dict:
    out = {"seq": seq, "type": "event", "event": name}
    if body is not None:
        out["body"] = body
    return out
