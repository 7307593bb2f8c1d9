"""Assembly text → NacFile (then bytes through the normal writer).

Payloads (tensor data, RSRC files, ARRS arrays) are taken by name from ``weights``: the
original ``.nac`` or a ``.safetensors`` file. Everything else comes from the text, so a
hand-edited program (a patched constant, a new instruction) assembles without the
original. Unknown op names, signatures and literal constants are added to CMAP/PERM/CNST.
"""
from __future__ import annotations

import os
import re
from array import array
from typing import Optional

import numpy as np

from ..files import check_regular
from ..format.mapped import read_at

from ..format import layout as L
from ..format.mmap_table import COMMAND, RECORD_HEAD, MmapTable
from ..format.name_tables import made_parameters
from ..format.model import (Constant, Header, InputName, NacFile, NamedArray, Orch,
                            Parameter, Proc, Resource, TensorMeta)
from .literals import parse_literal, parse_name, split_top, strip_comment
from ..isa.mep import encode_instruction, parse_mep
from .textops import Tables, TextError, parse_instruction

_MMAP_LINE = re.compile(r"^@(\d+):\s*(.*)$")


def assemble(text: str, weights=None) -> NacFile:
    """Parse assembly ``text``. ``weights``: path of a .nac / .safetensors, or a NacFile."""
    src = _WeightSource(weights)
    try:
        return _Assembler(src).run(text)
    finally:
        src.close()


# Python's own conversion messages, in the user's terms
_PYTHON_WORDS = ((re.compile(r"invalid literal for int\(\) with base \d+: (.*)", re.S), "{} is not a whole number"),
                 (re.compile(r"could not convert string to float: (.*)", re.S), "{} is not a number"),
                 (re.compile(r"non-hexadecimal number found in fromhex\(\) arg at position (\d+)"),
                  "not hexadecimal (character {} of the hex text)"))


_MEP_IP = re.compile(r"\s*\d+\s*:")


def _plain(e: BaseException) -> str:
    """An exception's message in the user's terms: no Python function names (``int()``,
    ``fromhex()``, the int-digit limit's sys call)."""
    text = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    text = str(text)
    if "integer string conversion" in text:
        return "a number with thousands of digits is out of range for any field"
    for pattern, words in _PYTHON_WORDS:
        m = pattern.fullmatch(text)
        if m:
            return words.format(m.group(1))
    return text


def _section_of(e: BaseException) -> str:
    text = str(e)
    if "fromhex" in text:
        return ".bytecode"
    return ".mep"


class _WeightSource:
    def __init__(self, weights):
        self.nac: Optional[NacFile] = None
        self.st = None
        self.own = False
        self._params_by_name: Optional[dict] = None
        self.label = str(weights)
        self._by_name: dict = {}
        if weights is None:
            return
        if isinstance(weights, NacFile):
            self.nac = weights
            return
        path = os.fspath(weights)
        if path.endswith(".safetensors"):
            from safetensors import safe_open
            check_regular(path, section="weights")
            self.st = safe_open(path, framework="numpy")
        else:
            from ..format.reader import read
            # leniently: only payloads are taken from it; a defect elsewhere in it is not this text's
            self.nac, self.own = read(path, strict=False), True

    def close(self) -> None:
        if self.own and self.nac is not None:
            self.nac.close()

    def tensor(self, name: str, meta: TensorMeta) -> bytes:
        if self.nac is not None:
            if self._params_by_name is None:     # the parameters with data only (a read file made those alone)
                self._params_by_name = {p.name: p for p in made_parameters(self.nac.params)}
            p = self._params_by_name.get(name)
            if p is not None and p.data_offset >= 0:
                return bytes(read_at(self.nac, p.data_offset, p.data_length, "DATA/tensors", f"tensor {name!r}"))
            if p is not None and p._payload is not None:
                return bytes(np.ascontiguousarray(p.raw()).view(np.uint8).reshape(-1))
        if self.st is not None and name in self.st.keys():
            arr = np.ascontiguousarray(self.st.get_tensor(name))
            return arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        raise self._missing(f"tensor data for parameter {name!r}", "the original .nac or a .safetensors")

    def resource(self, name: str) -> bytes:
        return self._named("rsrc", name, "resource file").data

    def array(self, name: str) -> bytes:
        return self._named("arrs", name, "array").data

    def _named(self, part: str, name: str, what: str):
        """The next entry of that name in the source's RSRC or ARRS: the k-th ``.rsrc NAME`` line
        takes the k-th file of that name (one dict, not a scan per line: 20k files)."""
        table = self._by_name.get(part)
        if table is None:
            table = self._by_name[part] = {}
            for item in reversed((getattr(self.nac, part) or []) if self.nac is not None else []):
                table.setdefault(item.name, []).append(item)
        items = table.get(name)
        if not items:
            raise self._missing(f"{what} {name!r}", "the original .nac")
        return items.pop() if len(items) > 1 else items[0]

    def _missing(self, what: str, where: str) -> LookupError:
        # the text names the data (a listing keeps only its size); it comes from --weights
        if self.nac is None and self.st is None:
            return LookupError(f"{what}: the text has only its name; pass {where} with --weights")
        return LookupError(f"{what} not found in {self.label}; pass {where} that has it with --weights")


class _Assembler:
    def __init__(self, src: _WeightSource):
        self.src = src
        self.nac = NacFile()
        self.mode = None
        self.explicit_inputs: list = []
        self.line_names: dict = {}
        self.ops_lines: list = []
        self.trng_lines: list = []
        self.mep_lines: list = []
        self.bytecode_hex: list = []
        self.proc_hex: Optional[list] = None
        self.trailing_hex: dict = {}
        self.header_keys: set = set()
        self.mmap_bytes = bytearray()           # the .mmap lines, packed (see _mmap)
        self.mmap_starts = array("Q")

    def run(self, text: str) -> NacFile:
        self.section_lines: dict = {}
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = strip_comment(raw).strip()
            if not line:
                continue
            if line.startswith((".mep", ".bytecode", ".proc", ".trailing")):
                self.section_lines.setdefault(line.split()[0], lineno)
            try:
                if line.startswith("."):
                    self._directive(line, lineno)
                elif self.mode == "ops":
                    self.ops_lines.append((lineno, line))
                elif self.mode == "trng":
                    self.trng_lines.append((lineno, line))
                elif self.mode == "mmap":
                    self._mmap(line, lineno)
                else:
                    raise TextError(lineno, f"unexpected line outside a section: {line[:60]!r}")
            except TextError:
                raise
            except (ValueError, LookupError, KeyError, IndexError, OverflowError) as e:
                raise TextError(lineno, _plain(e)) from None
        try:
            return self._finish()
        except TextError:
            raise
        except (ValueError, LookupError, KeyError, IndexError, OverflowError) as e:
            # whole-section work (ORCH bytecode, PROC/trailing hex) happens after the last line:
            # name the section's first line
            lineno = self.section_lines.get(_section_of(e), 0) or min(self.section_lines.values(), default=0)
            raise TextError(lineno, _plain(e)) from None

    def _finish(self) -> NacFile:
        nac = self.nac
        if self.mmap_starts:
            nac.mmap = MmapTable(bytes(self.mmap_bytes), 0, self.mmap_starts)
        tables = Tables(nac)
        for i, (lineno, line) in enumerate(self.ops_lines):
            nac.instructions.append(parse_instruction(line, i, tables, lineno=lineno, names_out=self.line_names))
        if self.trng_lines or nac.trng is not None:
            nac.trng = [parse_instruction(line, i, tables, lineno=lineno)
                        for i, (lineno, line) in enumerate(self.trng_lines)]
        nac.input_names = self.explicit_inputs or [InputName(i, n) for i, n in sorted(self.line_names.items())]
        # Counts a hand-written program leaves out follow from its lines (the reader needs
        # the output count to size <OUTPUT>'s fields).
        if "outputs" not in self.header_keys:
            ret = [i for i in nac.instructions if i.a == 3 and i.b == 0]
            nac.header.num_outputs = len(ret[-1].d or ()) if ret else 0
        if "inputs" not in self.header_keys:
            nac.header.num_inputs = len(nac.input_names)
        if nac.orch is not None:
            if self.mep_lines and self.bytecode_hex:
                raise TextError(self.section_lines.get(".bytecode", 0),
                                "ORCH bytecode is given twice (.mep lines and .bytecode hex): keep one")
            if self.mep_lines:
                # An instruction without a jump encodes the same wherever it stands: each such
                # text (after its "ip:") is parsed and encoded once (a program's loops repeat them)
                encoded: dict = {}
                chunks = []
                for lineno, ln in self.mep_lines:
                    body = _MEP_IP.sub("", ln, 1)
                    code = encoded.get(body)
                    if code is None:
                        try:
                            ins = parse_mep(ln)
                            code = encode_instruction(ins)
                        except (ValueError, LookupError, OverflowError) as e:
                            raise TextError(lineno, _plain(e)) from None
                        if "jump" not in dict(ins.operands) and len(encoded) < 65536:
                            encoded[body] = code
                    chunks.append(code)
                nac.orch.bytecode = b"".join(chunks)
            else:
                nac.orch.bytecode = bytes.fromhex("".join(self.bytecode_hex))
        if self.proc_hex is not None:
            nac.proc = Proc(bytes.fromhex("".join(self.proc_hex)))
        for region, parts in self.trailing_hex.items():
            nac.trailing[region] = bytes.fromhex("".join(parts))
        for tag, attr in (("RSRC", "rsrc"), ("ARRS", "arrs"), ("TRNG", "trng")):
            if tag in nac.layout and getattr(nac, attr) is None:
                setattr(nac, attr, [])
        if "ORCH" in nac.layout and nac.orch is None:
            nac.orch = Orch()
        if "PROC" in nac.layout and nac.proc is None:
            nac.proc = Proc()
        nac.invalidate()
        return nac

    # ------------------------------------------------------------------ directives
    def _directive(self, line: str, lineno: int) -> None:
        word, _, rest = line.partition(" ")
        rest = rest.strip()
        nac = self.nac
        if word == ".version":
            if rest not in L.LAYOUTS:
                raise TextError(lineno, f"unknown version {rest!r}")
            nac.header.version = rest
        elif word == ".header":
            self._header(rest, lineno)
        elif word == ".layout":
            known = ("MMAP", "OPS", "CMAP", "CNST", "PERM", "DATA", "PROC", "ORCH", "RSRC", "TRNG", "ARRS")
            tags = rest.split()
            unknown = [t for t in tags if t not in known]
            if unknown or len(set(tags)) != len(tags):
                raise TextError(lineno, f".layout lists {unknown[0][:20] if unknown else 'a section twice'!r}; "
                                        f"sections are {' '.join(known)}, each at most once")
            nac.layout = tags
        elif word == ".cmap":
            oid, name = rest.split(None, 1)
            nac.cmap[int(oid)] = parse_name(name)
        elif word == ".perm":
            sid, sig = rest.split(None, 1)
            nac.perms[int(sid)] = parse_name(sig)
        elif word == ".const":
            c = _const(rest)
            nac.constants[c.id] = c
        elif word == ".param":
            pid, name = rest.split(None, 1)
            nac.params[int(pid)] = Parameter(int(pid), parse_name(name), _file=nac)
        elif word == ".tensor":
            pid, meta_text = rest.split(None, 1)
            p = nac.params.get(int(pid))
            if p is None:
                raise TextError(lineno, f".tensor {pid}: no .param {pid} declared before it")
            p.meta = parse_meta(meta_text)
            p._payload = self.src.tensor(p.name, p.meta)
            p.data_length = len(p._payload)
            nac.tensor_order.append(p.id)
        elif word == ".input":
            idx, name = rest.split(None, 1)
            self.explicit_inputs.append(InputName(int(idx), parse_name(name)))
        elif word in (".ops", ".mmap", ".trng"):
            self.mode = word[1:]
            if word == ".trng" and nac.trng is None:
                nac.trng = []
        elif word == ".orch":
            nac.orch = Orch()
        elif word == ".mep":
            self.mep_lines.append((lineno, rest))
        elif word == ".bytecode":
            self.bytecode_hex.append(rest)
        elif word == ".pool":
            if nac.orch is None:
                nac.orch = Orch()
            nac.orch.pool.append(_const(rest))
        elif word == ".proc":
            if self.proc_hex is None:
                self.proc_hex = []
            if rest:
                self.proc_hex.append(rest)      # (a new list per line made 1 MB of hex quadratic)
        elif word == ".rsrc":
            name, _size = _name_and_tail(rest)
            if nac.rsrc is None:
                nac.rsrc = []
            nac.rsrc.append(Resource(name, _payload=self.src.resource(name)))
        elif word == ".array":
            name, tail = _name_and_tail(rest)
            dtype, tail = tail.split(None, 1)
            shape_text = tail[:tail.index("]") + 1]
            shape = tuple(int(x) for x in split_top(shape_text[1:-1]) if x)
            code = L.DTYPE_CODES[dtype] if dtype in L.DTYPE_CODES else _int_or(dtype)
            if nac.arrs is None:
                nac.arrs = []
            nac.arrs.append(NamedArray(name, code, shape, _payload=self.src.array(name)))
        elif word == ".trailing":
            region, _, hx = rest.partition(" ")
            self.trailing_hex.setdefault(region, []).append(hx.strip())
        else:
            raise TextError(lineno, f"unknown directive {word}")

    def _header(self, rest: str, lineno: int) -> None:
        h: Header = self.nac.header
        for item in rest.split():
            k, _, v = item.partition("=")
            self.header_keys.add(k)
            if k == "quant":
                h.quant_method = L.QUANT_CODES[v.lower()] if v.lower() in L.QUANT_CODES else int(v)
            elif k == "weights":
                if v not in ("internal", "external"):
                    raise TextError(lineno, f"weights must be internal or external, not {v!r}")
                h.weights_internal = v == "internal"
            elif k == "inputs":
                h.num_inputs = int(v)
            elif k == "outputs":
                h.num_outputs = int(v)
            elif k == "d_model":
                h.d_model = int(v)
            elif k == "trng":
                h.trng_flag = v not in ("0", "false", "False")
            elif k == "reserved":
                h.reserved = int(v)
            elif k == "padding":
                h.padding = bytes.fromhex(v)
            else:
                raise TextError(lineno, f"unknown header field {k!r}")

    def _mmap(self, line: str, lineno: int) -> None:
        m = _MMAP_LINE.match(line)
        if not m:
            raise TextError(lineno, f"expected '@TICK: ACTION vN, ...', got {line[:60]!r}")
        tick = int(m.group(1))
        record = bytearray()
        for part in split_top(m.group(2)) if m.group(2).strip() else []:
            action, target = part.split()
            code = L.MMAP_ACTION_CODES.get(action)
            if code is None:
                if not action.startswith("ACTION_"):
                    raise TextError(lineno, f"unknown MMAP action {action!r}")
                code = int(action[7:])
            if not target.startswith("v"):
                raise TextError(lineno, f"MMAP target must be vN, got {target!r}")
            value = int(target[1:])
            if not (0 <= code <= 255 and 0 <= value <= 65535):
                raise TextError(lineno, f"MMAP {action} v{value} does not fit its fields (action 0..255, "
                                        f"target v0..v65535)")
            record += COMMAND.pack(code, value)
        if not (0 <= tick <= 65535 and len(record) <= 3 * 255):
            raise TextError(lineno, f"MMAP record @{tick} with {len(record) // 3} commands does not fit its "
                                    f"fields (tick 0..65535, 255 commands)")
        # packed as the file holds it (MmapTable): a record object each was 120 bytes for a
        # listing line of 5, past the memory bound on a schedule of empty records
        self.mmap_starts.append(len(self.mmap_bytes))
        self.mmap_bytes += RECORD_HEAD.pack(tick, len(record) // 3) + record


def _name_and_tail(rest: str) -> tuple[str, str]:
    if rest.startswith('"'):
        end = rest.index('"', 1)
        while rest[end - 1] == "\\":
            end = rest.index('"', end + 1)
        return parse_name(rest[:end + 1]), rest[end + 1:].strip()
    name, _, tail = rest.partition(" ")
    return name, tail.strip()


def _int_or(text: str) -> int:
    if text.startswith("dtype"):
        return int(text[5:])
    return int(text)


def _const(rest: str) -> Constant:
    cid, typ, lit = rest.split(None, 2)
    length_field = None
    m = re.search(r"\s+len=(\d+)$", lit)
    if m:
        length_field = int(m.group(1))
        lit = lit[:m.start()]
    type_code = L.CONST_TYPE_CODES.get(typ)
    if type_code is None:
        raise ValueError(f"unknown constant type {typ!r}")
    parsed_type, value = parse_literal(lit)
    if parsed_type != type_code:
        # the literal grammar maps int64/float64 literals; list/null/bool must agree exactly
        if type_code == L.CONST_FLOAT64 and parsed_type == L.CONST_INT64:
            value = float(value)
        elif type_code == L.CONST_LIST_F32 and parsed_type == L.CONST_LIST_I32 and not value:
            value = ()
        else:
            raise ValueError(f"constant {cid}: literal {lit!r} is not a {typ}")
    if type_code in (L.CONST_NULL, L.CONST_BOOL) and length_field is None:
        length_field = 0 if type_code == L.CONST_NULL else 1
    return Constant(int(cid), type_code, value, length_field)


def parse_meta(text: str) -> TensorMeta:
    """``DTYPE [SHAPE] [quant=... scale=... axis=... scales=[...] block=... orig=[...] extra=HEX | pad=N]``."""
    dtype, rest = text.split(None, 1)
    rest = rest.strip()
    shape_end = rest.index("]") + 1
    shape = tuple(int(x) for x in rest[1:shape_end - 1].split(",") if x.strip())
    code = L.DTYPE_CODES.get(dtype)
    if code is None:
        code = _int_or(dtype)
    meta = TensorMeta(code, shape, 0)
    for item in rest[shape_end:].split():
        k, _, v = item.partition("=")
        if k == "quant":
            meta.quant = L.QUANT_CODES[v.lower()] if v.lower() in L.QUANT_CODES else int(v)
        elif k == "scale":
            if v.startswith("0x"):
                meta.scale_bits = bytes.fromhex(v[2:])[::-1]
            else:
                meta.scale_bits = np.float32(float(v)).astype("<f4").tobytes()
            meta.scale = float(np.frombuffer(meta.scale_bits, "<f4")[0])
        elif k == "axis":
            meta.axis = int(v)
        elif k == "scales":
            meta.scales = _scales(v)
        elif k == "block":
            meta.block_size = int(v)
        elif k == "orig":
            meta.original_shape = tuple(int(x) for x in v[1:-1].split(",") if x.strip())
        elif k == "extra":
            meta.extra = bytes.fromhex(v)
        elif k == "pad":
            if not v.isdigit() or int(v) > 1 << 16:
                raise ValueError(f"pad={v}: give a number of zero bytes (at most 65536)")
            meta.extra = bytes(int(v))
        else:
            raise ValueError(f"unknown tensor field {k!r}")
    return meta


def _scales(v: str) -> np.ndarray:
    if v.startswith("hex:"):
        return np.frombuffer(bytes.fromhex(v[4:]), "<f4").copy()
    inner = v.strip()[1:-1]
    return np.array([float(x) for x in inner.split(",") if x.strip()], dtype="<f4")
