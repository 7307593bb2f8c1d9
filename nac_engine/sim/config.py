"""Hardware description for the simulator: typed, validated, loaded from TOML.

A hardware file is untrusted input. Every key is checked against :data:`SCHEMA` (type and
range); an unknown key, a wrong type or an out-of-range value raises
:class:`HardwareConfigError` naming the dotted key (``array.rows: expected an integer in
[1, 65536], got -3``). Omitted keys take the defaults in :data:`SCHEMA`, so a file only says
what differs.

``[ops]`` says what an op costs where the simulator's own tables do not know it (a custom
operator of your accelerator, or to override one): ``"mylib::fused_gelu" = "elementwise"`` (one
of :data:`OP_COST_CLASSES`: costed like those ops) or ``= 120`` (that many cycles on the vector
unit); keys are ``namespace::op`` names or globs (``"mylib::*"``), the first that matches wins.

``load_hardware(spec)`` accepts a preset name (``edge-32x32``; the files in
``nac_engine/sim/presets/``), a path to a ``.toml`` file, a mapping (already-parsed TOML) or a
:class:`HardwareConfig`. ``overrides={"array.rows": 64}`` replaces single keys before
validation (what ``nac sim --sweep`` does).

Units: cycles of the core clock, bytes. ``dram.bytes_per_cycle`` is the DRAM channel's
bandwidth in bytes per core cycle, shared by all DMA engines.
"""
from __future__ import annotations

import importlib.resources
import math
from fnmatch import fnmatchcase
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Optional

from ..errors import NacFormatError
from ..files import open_regular
from ..isa.optable import qualified_name

#: The bundled presets: package data, found through importlib.resources (a wheel ships them).
PRESET_DIR = Path(str(importlib.resources.files("nac_engine.sim").joinpath("presets")))
MAX_TOML_BYTES = 1 << 20
# The deepest key the schema has is refcore.latency.preload (three tables down); anything much
# deeper is not a hardware description, and walking it recursively could exhaust the stack.
MAX_DEPTH = 8

DATAFLOWS = ("os", "ws", "is")
# scalesim: SCALE-Sim v2/v3's dense compute cycles (folds·F − 1), exact;
# pipelined: the next fold's stationary-operand load hidden behind the current stream
#            (derived, ONNXim-style); tile: K + 3·DIM − 2 per DIM×DIM output tile, no overlap
#            (the reference core's standalone systolic block, research upstream_hardware §5.3).
ARRAY_TIMINGS = ("scalesim", "pipelined", "tile")
CORE_MODELS = ("event", "refcore")
VECTOR_CLASSES = ("elementwise", "compare", "reduction", "unknown")
MMAP_ACTIONS = ("preload", "save_result", "forward", "free")
#: What an ``[ops]`` entry may cost an op as (classes whose cost needs only the op's tensor sizes).
OP_COST_CLASSES = ("elementwise", "compare", "reduction", "reduction2", "sfu", "softmax", "norm", "copy", "alias")
MAX_OP_RULES = 256


class HardwareConfigError(ValueError):
    """A hardware description is malformed; the message names the key."""


# --------------------------------------------------------------------------- schema
class _F:
    """One field: kind, range or choices, default, and a line of documentation."""

    def __init__(self, kind: str, default: Any, doc: str, lo: Any = None, hi: Any = None,
                 choices: tuple = ()):
        self.kind, self.default, self.doc = kind, default, doc
        self.lo, self.hi, self.choices = lo, hi, choices

    def check(self, key: str, v: Any) -> Any:
        k = self.kind
        if k == "int":
            if isinstance(v, bool) or not isinstance(v, int):
                raise HardwareConfigError(f"{key}: expected an integer in [{self.lo}, {self.hi}], "
                                          f"got {v!r}")
            if not self.lo <= v <= self.hi:
                raise HardwareConfigError(f"{key}: expected an integer in [{self.lo}, {self.hi}], got {v}")
            return v
        if k == "float":
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise HardwareConfigError(f"{key}: expected a number in [{self.lo}, {self.hi}], got {v!r}")
            v = float(v)
            if not math.isfinite(v) or not self.lo <= v <= self.hi:
                raise HardwareConfigError(f"{key}: expected a number in [{self.lo}, {self.hi}], got {v}")
            return v
        if k == "enum":
            if v not in self.choices:
                raise HardwareConfigError(f"{key}: expected one of {', '.join(map(repr, self.choices))}, "
                                          f"got {v!r}")
            return v
        if k == "str":
            if not isinstance(v, str) or len(v) > 4096:
                raise HardwareConfigError(f"{key}: expected a string (at most 4096 characters), got {v!r}")
            return v
        if k == "int_or_enum":       # a cycle count or a named rule
            if isinstance(v, str):
                if v not in self.choices:
                    raise HardwareConfigError(f"{key}: expected an integer in [{self.lo}, {self.hi}] or "
                                              f"one of {', '.join(map(repr, self.choices))}, got {v!r}")
                return v
            if isinstance(v, bool) or not isinstance(v, int) or not self.lo <= v <= self.hi:
                raise HardwareConfigError(f"{key}: expected an integer in [{self.lo}, {self.hi}] or one "
                                          f"of {', '.join(map(repr, self.choices))}, got {v!r}")
            return v
        raise AssertionError(k)   # pragma: no cover


BIG = 1 << 48
CYC = 1 << 32

# section -> key -> field. Tables whose keys are free-form (dtype_bytes, cycles_per_vector)
# are handled separately below.
SCHEMA: dict[str, dict[str, _F]] = {
    "": {
        "name": _F("str", "custom", "preset name"),
        "description": _F("str", "", "one line about what this models"),
        "clock_hz": _F("float", 1.0e9, "core clock in Hz (cycles → seconds)", 1.0, 1.0e13),
    },
    "array": {
        "rows": _F("int", 32, "systolic array rows (R)", 1, 65536),
        "cols": _F("int", 32, "systolic array columns (C)", 1, 65536),
        "dataflow": _F("enum", "os", "output-, weight- or input-stationary", choices=DATAFLOWS),
        "timing": _F("enum", "pipelined", "fold timing model", choices=ARRAY_TIMINGS),
    },
    "vector": {
        "lanes": _F("int", 32, "elements per vector-unit cycle", 1, 1 << 20),
        "latency": _F("int", 2, "pipeline fill per vector instruction (cycles)", 0, CYC),
    },
    "sfu": {
        "lanes": _F("int", 8, "special-function elements per issue", 1, 1 << 20),
        "cycles_per_vector": _F("int", 4, "cycles per SFU issue (exp, tanh, rsqrt, ...)", 1, CYC),
        "latency": _F("int", 4, "pipeline fill per SFU instruction (cycles)", 0, CYC),
    },
    "movement": {
        "bytes_per_cycle": _F("int", 32, "on-chip copy bandwidth (transpose, cat, slice, gather)", 1, BIG),
        "latency": _F("int", 2, "fixed cycles per copy instruction", 0, CYC),
        "view_cycles": _F("int", 1, "cycles of an aliasing op (view, reshape, unsqueeze, expand)", 0, CYC),
    },
    "sram": {
        "bytes": _F("int", 1 << 20, "on-chip SRAM capacity", 1, BIG),
        "banks": _F("int", 8, "SRAM banks (reported; not a timing constraint)", 1, 1 << 16),
    },
    "dram": {
        "bytes_per_cycle": _F("float", 16.0, "DRAM channel bandwidth, bytes per core cycle", 1e-6, 1e12),
        "latency": _F("int", 100, "cycles from a DMA request to its first byte", 0, CYC),
    },
    "dma": {
        "engines": _F("int", 2, "DMA engines (transfers in flight at once)", 1, 4096),
    },
    "core": {
        "model": _F("enum", "event", "event: MMAP-driven event engine; refcore: reference RTL timing",
                    choices=CORE_MODELS),
        "dispatch_cycles": _F("int", 0, "fixed cycles added to every regular instruction", 0, CYC),
    },
    "refcore": {
        "slots_per_tick": _F("int", 256, "MMAP schedule slots scanned per tick (S)", 1, 65536),
        "idx_width": _F("int", 10, "instruction index bits (2^idx ticks at most)", 1, 16),
        "ilat": _F("int", 1, "input-provider latency (cycles)", 0, CYC),
        "klat": _F("int_or_enum", "derived", "kernel latency: cycles, or 'derived' from the op's cost",
                   0, CYC, choices=("derived",)),
        "klat_min": _F("int", 3, "smallest derived kernel latency (the SoC's codec+DSP path)", 0, CYC),
        "run_mode": _F("enum", "cached", "cached (instruction cache) or legacy streaming start",
                       choices=("cached", "legacy")),
        "memory_semantics": _F("enum", "accept", "accept: MMAP effects at the RTL's accept cycle; "
                               "tick: at the tick's commit (the spec)", choices=("accept", "tick")),
        "lanes": _F("int", 8, "1-D DSP lanes (derived costs)", 1, 1 << 20),
        "systolic_dim": _F("int", 0, "systolic block DIM for derived matmul cost (0: 1-D MAC)", 0, 65536),
        "sfu_round_trip": _F("int", 2, "external SFU request→response cycles R (EXP/RSQRT)", 0, CYC),
        "dma_request_cycles": _F("int", 3, "PRELOAD accept → DMA read request (DMA manager)", 0, CYC),
        "dma_ready_cycles": _F("int", 2, "DMA done → manager ready for the next command", 0, CYC),
        "command_cycles": _F("int", 2, "accept → ready for FREE/FORWARD/SAVE/PRELOAD hit", 0, CYC),
        "watchdog_cycles": _F("int", 0, "progress watchdog: a run with no handshake for longer than "
                              "this is an error at that cycle (RTL C7); 0 = off", 0, CYC),
        "op_table": _F("enum", "any", "which op ids ORCH executes: 'cmap' = the RTL's hard-wired "
                       "ids plus the file's CMAP (others are an ORCH error, RTL C12); 'any' = all",
                       choices=("any", "cmap")),
    },
    "refcore.latency": {
        a: _F("int_or_enum", "dma", f"{a.upper()} ready latency: cycles valid waits, or 'dma' "
              "(the DMA manager model)", 0, CYC, choices=("dma",)) for a in MMAP_ACTIONS
    },
}

DEFAULT_DTYPE_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "complex128": 16, "complex64": 8,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
}
DEFAULT_CYCLES_PER_VECTOR = {c: 1 for c in VECTOR_CLASSES}
_FREE_TABLES = {"dtype_bytes": (DEFAULT_DTYPE_BYTES, 1, 64, "bytes per element"),
                "vector.cycles_per_vector": (DEFAULT_CYCLES_PER_VECTOR, 1, CYC, "cycles per vector")}


# --------------------------------------------------------------------------- typed config
@dataclass(frozen=True)
class ArrayConfig:
    rows: int
    cols: int
    dataflow: str
    timing: str


@dataclass(frozen=True)
class VectorConfig:
    lanes: int
    latency: int
    cycles_per_vector: Mapping[str, int]


@dataclass(frozen=True)
class SfuConfig:
    lanes: int
    cycles_per_vector: int
    latency: int


@dataclass(frozen=True)
class MovementConfig:
    bytes_per_cycle: int
    latency: int
    view_cycles: int


@dataclass(frozen=True)
class SramConfig:
    bytes: int
    banks: int


@dataclass(frozen=True)
class DramConfig:
    bytes_per_cycle: float
    latency: int


@dataclass(frozen=True)
class DmaConfig:
    engines: int


@dataclass(frozen=True)
class CoreConfig:
    model: str
    dispatch_cycles: int


@dataclass(frozen=True)
class RefcoreConfig:
    slots_per_tick: int
    idx_width: int
    ilat: int
    klat: Any                 # int or "derived"
    klat_min: int
    run_mode: str
    memory_semantics: str
    lanes: int
    systolic_dim: int
    sfu_round_trip: int
    dma_request_cycles: int
    dma_ready_cycles: int
    command_cycles: int
    latency: Mapping[str, Any]   # action -> int or "dma"
    watchdog_cycles: int = 0
    op_table: str = "any"


@dataclass(frozen=True)
class HardwareConfig:
    name: str
    description: str
    clock_hz: float
    array: ArrayConfig
    vector: VectorConfig
    sfu: SfuConfig
    movement: MovementConfig
    sram: SramConfig
    dram: DramConfig
    dma: DmaConfig
    core: CoreConfig
    refcore: RefcoreConfig
    dtype_bytes: Mapping[str, int]
    source: Optional[str] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    ops: Mapping[str, Any] = field(default_factory=dict)    # [ops]: name or glob -> class or cycles
    _op_rules: dict = field(default_factory=dict, repr=False, compare=False)   # op name -> its rule, once

    def op_rule(self, op: str) -> Any:
        """The ``[ops]`` entry for an instruction's op (``mylib.fused.default`` is matched as
        ``mylib::fused``, and as written), or None; each op name is matched once (a 7B model has
        tens of thousands of instructions, of a few dozen ops)."""
        if not self.ops:
            return None
        if op not in self._op_rules:
            names = (op, qualified_name(op))
            self._op_rules[op] = next((rule for pattern, rule in self.ops.items()
                                       if any(fnmatchcase(n, pattern) for n in names)), None)
        return self._op_rules[op]

    def element_bytes(self, dtype: str) -> int:
        """Bytes per element of ``dtype`` (torch name, e.g. ``float32``); unknown names count 4
        and are reported by the simulator."""
        return self.dtype_bytes.get(dtype, 4)

    def to_dict(self) -> dict:
        """The validated values as nested plain dicts (the TOML layout)."""
        return _nested(self.raw)

    def with_overrides(self, overrides: Mapping[str, Any]) -> "HardwareConfig":
        return build_hardware(_apply_overrides(_nested(self.raw), overrides), source=self.source)


# --------------------------------------------------------------------------- building
def _check_depth(doc: Any, where: str) -> None:
    """Raise when tables or arrays nest more than :data:`MAX_DEPTH` levels (iteratively: the
    check itself must not recurse; a mapping that contains itself fails it too)."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise HardwareConfigError(f"{where}: tables or arrays nested more than {MAX_DEPTH} levels deep")
        for v in (node.values() if isinstance(node, Mapping) else node):
            if isinstance(v, (Mapping, list, tuple)):
                stack.append((v, depth + 1))


def _nested(flat_or_nested: Mapping[str, Any]) -> dict:
    out: dict = {}
    for k, v in flat_or_nested.items():
        out[k] = _nested(v) if isinstance(v, Mapping) else v
    return out


def _apply_overrides(doc: dict, overrides: Mapping[str, Any]) -> dict:
    for dotted, value in (overrides or {}).items():
        if not isinstance(dotted, str) or not dotted or len(dotted) > 200:
            raise HardwareConfigError(f"override key {dotted!r}: expected a dotted key such as array.rows")
        parts = dotted.split(".")
        node = doc
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                raise HardwareConfigError(f"{dotted}: {p!r} is a value, not a table")
            node = nxt
        node[parts[-1]] = value
    return doc


def build_hardware(doc: Mapping[str, Any], source: Optional[str] = None) -> HardwareConfig:
    """Validate a parsed TOML document and return the typed config."""
    if not isinstance(doc, Mapping):
        raise HardwareConfigError("hardware description: expected a table at the top level")
    _check_depth(doc, "hardware description")
    values: dict[str, dict[str, Any]] = {sec: {} for sec in SCHEMA}
    tables: dict[str, dict[str, int]] = {t: dict(d) for t, (d, *_r) in _FREE_TABLES.items()}
    ops: dict[str, Any] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for key, v in node.items():
            if not isinstance(key, str):
                raise HardwareConfigError(f"{prefix or 'top level'}: keys must be strings")
            dotted = f"{prefix}.{key}" if prefix else key
            if dotted == "ops":
                _read_op_rules(v, ops)
                continue
            if dotted in _FREE_TABLES:
                _read_free_table(dotted, v, tables[dotted])
                continue
            if isinstance(v, Mapping):
                if dotted not in SCHEMA:
                    raise HardwareConfigError(f"{dotted}: unknown table (known: "
                                              f"{', '.join(sorted(s for s in SCHEMA if s) + sorted(_FREE_TABLES))})")
                walk(v, dotted)
                continue
            fields = SCHEMA.get(prefix)
            if fields is None or key not in fields:
                known = ", ".join(sorted(fields)) if fields else "none"
                raise HardwareConfigError(f"{dotted}: unknown key (known in "
                                          f"{prefix or 'the top level'}: {known})")
            values[prefix][key] = fields[key].check(dotted, v)

    walk(doc, "")
    resolved = {sec: {k: values[sec].get(k, f.default) for k, f in fields.items()}
                for sec, fields in SCHEMA.items()}
    top = resolved[""]
    rc = dict(resolved["refcore"])
    rc["latency"] = MappingProxyType(dict(resolved["refcore.latency"]))
    vec = resolved["vector"]
    cfg = HardwareConfig(
        name=top["name"], description=top["description"], clock_hz=top["clock_hz"],
        array=ArrayConfig(**resolved["array"]),
        vector=VectorConfig(vec["lanes"], vec["latency"],
                            MappingProxyType(tables["vector.cycles_per_vector"])),
        sfu=SfuConfig(**resolved["sfu"]),
        movement=MovementConfig(**resolved["movement"]),
        sram=SramConfig(**resolved["sram"]),
        dram=DramConfig(**resolved["dram"]),
        dma=DmaConfig(**resolved["dma"]),
        core=CoreConfig(**resolved["core"]),
        refcore=RefcoreConfig(**rc),
        dtype_bytes=MappingProxyType(tables["dtype_bytes"]),
        source=source,
        raw=_raw_of(resolved, tables, ops),
        ops=MappingProxyType(ops),
    )
    return cfg


def _read_free_table(key: str, v: Any, into: dict) -> None:
    defaults, lo, hi, what = _FREE_TABLES[key]
    if not isinstance(v, Mapping):
        raise HardwareConfigError(f"{key}: expected a table of name = {what}")
    if len(v) > 256:
        raise HardwareConfigError(f"{key}: at most 256 entries")
    for name, n in v.items():
        if key == "vector.cycles_per_vector" and name not in VECTOR_CLASSES:
            raise HardwareConfigError(f"{key}.{name}: unknown op class (known: {', '.join(VECTOR_CLASSES)})")
        if not isinstance(name, str) or not name or len(name) > 64:
            raise HardwareConfigError(f"{key}: bad entry name {name!r}")
        if isinstance(n, bool) or not isinstance(n, int) or not lo <= n <= hi:
            raise HardwareConfigError(f"{key}.{name}: expected an integer in [{lo}, {hi}] ({what}), got {n!r}")
        into[name] = n


def _read_op_rules(v: Any, into: dict) -> None:
    if not isinstance(v, Mapping):
        raise HardwareConfigError('ops: expected a table of "namespace::op" = "class" or cycles')
    if len(v) > MAX_OP_RULES:
        raise HardwareConfigError(f"ops: at most {MAX_OP_RULES} entries")
    for name, rule in v.items():
        if not isinstance(name, str) or not name or len(name) > 200:
            raise HardwareConfigError(f"ops: bad op name {name!r}")
        if isinstance(rule, str):
            if rule not in OP_COST_CLASSES:
                raise HardwareConfigError(f"ops.{name}: expected cycles or one of {', '.join(OP_COST_CLASSES)}, "
                                          f"got {rule!r}")
        elif isinstance(rule, bool) or not isinstance(rule, int) or not 0 <= rule <= CYC:
            raise HardwareConfigError(f"ops.{name}: expected cycles (an integer in [0, {CYC}]) or one of "
                                      f"{', '.join(OP_COST_CLASSES)}, got {rule!r}")
        into[name] = rule


def _raw_of(resolved: dict, tables: dict, ops: Optional[dict] = None) -> dict:
    out: dict = {}
    for sec, vals in resolved.items():
        if sec == "":
            out.update(vals)
            continue
        node = out
        for p in sec.split("."):
            node = node.setdefault(p, {})
        node.update(vals)
    out["dtype_bytes"] = dict(tables["dtype_bytes"])
    out["vector"]["cycles_per_vector"] = dict(tables["vector.cycles_per_vector"])
    if ops:
        out["ops"] = dict(ops)
    return out


# --------------------------------------------------------------------------- loading
def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml")) if PRESET_DIR.is_dir() else []


def _read_toml(path: Path) -> dict:
    try:
        size = path.stat().st_size
    except OSError as e:
        raise HardwareConfigError(f"{path}: {e.strerror or e}") from None
    if size > MAX_TOML_BYTES:
        raise HardwareConfigError(f"{path}: {size} bytes; a hardware file is at most {MAX_TOML_BYTES}")
    try:
        with open_regular(path) as f:
            return tomllib.load(f)
    except NacFormatError as e:
        raise HardwareConfigError(e.reason) from None
    except tomllib.TOMLDecodeError as e:
        raise HardwareConfigError(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise HardwareConfigError(f"{path}: not UTF-8 text: {e}") from None
    except RecursionError:
        # tomllib parses nested arrays and inline tables recursively and has no depth limit
        raise HardwareConfigError(f"{path}: tables or arrays nested too deeply to parse "
                                  f"(a hardware file nests at most {MAX_DEPTH} levels)") from None


def load_hardware(spec: Any = "edge-32x32", overrides: Optional[Mapping[str, Any]] = None) -> HardwareConfig:
    """A preset name, a ``.toml`` path, a parsed mapping, or a HardwareConfig → HardwareConfig."""
    if isinstance(spec, HardwareConfig):
        return spec.with_overrides(overrides) if overrides else spec
    if isinstance(spec, Mapping):
        _check_depth(spec, "hardware description")
        return build_hardware(_apply_overrides(_nested(spec), overrides or {}))
    if not isinstance(spec, (str, Path)):
        raise HardwareConfigError(f"hardware: expected a preset name, a .toml path or a table, got "
                                  f"{type(spec).__name__}")
    s = str(spec)
    path = Path(s)
    if not (s.endswith(".toml") or path.is_file()):
        candidate = PRESET_DIR / f"{s}.toml"
        if not candidate.is_file():
            raise HardwareConfigError(f"unknown hardware preset {s!r} (presets: "
                                      f"{', '.join(preset_names()) or 'none found'}; or give a .toml path)")
        path = candidate
    if not path.is_file():
        raise HardwareConfigError(f"{path}: no such hardware file")
    doc = _read_toml(path)
    try:
        return build_hardware(_apply_overrides(doc, overrides or {}), source=str(path))
    except HardwareConfigError as e:
        key, _, reason = str(e).partition(": ")
        if overrides and key in overrides:      # the value came from --set/--sweep or the form, not the file
            raise HardwareConfigError(f"{key}={overrides[key]} (set over {path.name}): {reason}") from None
        raise HardwareConfigError(f"{path.name}: {e}") from None


#: Keys that are byte counts: a command-line value may say 512K, 1M or 2MiB (binary, as the Studio's
#: "SRAM KiB" field and ``--cpu-budget``); never a key in Hz or per cycle, where M would mislead.
BYTE_KEYS = frozenset({"sram.bytes"})


def parse_value(text: str, key: str = "") -> Any:
    """A command-line value for config key ``key``: integer, number, true/false, or a string; a
    byte count (:data:`BYTE_KEYS`) also as ``512K``, ``1M``, ``1MiB``."""
    t = text.strip()
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if key in BYTE_KEYS and t[-1:].isalpha():
        from ..runtime.input_spec import parse_size
        try:
            return parse_size(t)
        except ValueError:
            return t                      # refused by the key's own check, with its range
    try:
        return int(t, 0)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t
