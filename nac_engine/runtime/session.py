"""Execute a NAC file's OPS stream (seed 000 §7–§8) on torch tensors.

Shaped like ``torch.fx.Interpreter``: :meth:`Session.run_instruction` is the core — gather the
arguments of one instruction, dispatch by kind, store the result under its tick in
``session.results`` — with one method per instruction kind (``load_input``, ``load_param``,
``load_state``, ``load_lifted``, ``call_op``, ``emit_output``) for subclasses to override.
Stepping, breakpoints and history belong around this core, not inside it.

Inputs (seed 000 §7.1):

* ``inputs``: mapping of DATA-block-2 name → value for named ``<INPUT>`` instructions
  (``{"input_ids": arr}``).
* ``feeds``: positional values for **every** ``<INPUT B=0>`` and ``<INPUT B=3>`` in instruction
  order — named inputs, unnamed B=0 placeholders (reference-compiled buffers) and lifted
  constants alike. An entry may be ``None`` to fall back to ``inputs``/the stored constant.
  A non-None feed wins over ``inputs``.
* ``<INPUT B=3>`` without a feed uses its CNST value, unless that value is the compiler's
  tensor placeholder string (``"Tensor_torch.Size([])_torch.int32"``, data not stored), which
  the caller must supply.
* ``states``: mapping ``state_id`` → initial value for ``<INPUT B=2>`` (by DATA name also
  accepted through ``inputs``). State lives in ``session.states`` and is kept across runs of
  one session; the spec defines no instruction that writes it back, so a caller updates it.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import torch

from ..errors import NacFormatError
from ..format.input_signature import read_input_signature
from ..format.layout import QUANT_NONE
from ..format.mapped import current_size, is_mapped, is_read_copy
from ..format.quant import dequantize
from ..format.weights import external_raw_tensors, raw_tensor
from ..format.model import Argument, Instruction, NacFile
from ..format.reader import read
from ..isa.optable import OP_CONTROL_FLOW, OP_CONVERGENCE, OP_INPUT, OP_OUTPUT
from ..isa.coerce import CODE_TYPES, InexactCoercion, as_used
from .errors import CoercionError, InputShapeError, KernelError, MissingInputError, NacRuntimeError, NotSupported
from .. import threads
from .kernels import Kernels, describe_args, first_of_multi, is_tensor_placeholder
from .fastcall import SLOW
from .prepared import PreparedCall, constant_key, keep_plan, shared_plan
from .stored_weights import mapped_tensor, stored_tensor, used_as_stored
from .tick_result import as_numpy as to_numpy  # one conversion to numpy, shared with TickResult

_INPUT_KINDS = {0: "user input", 1: "parameter", 2: "state", 3: "lifted constant"}
# Unquantised files keep these dtypes as PyTorch would compute in them (the codec widens
# them to float32 for display, as the reference runtime does).
_NATIVE_FLOAT = {1: torch.float64, 2: torch.float16, 3: torch.bfloat16}


@dataclass(frozen=True)
class InputSlot:
    """One value the caller supplies: an ``<INPUT B=0>`` or ``<INPUT B=3>``."""
    tick: int                 # instruction index
    variant: int              # B
    position: int             # index into ``feeds``
    name: Optional[str]       # DATA block 2 name, if any
    const_id: Optional[int] = None   # B=3: CNST id
    stored: Any = None               # B=3: the CNST value

    def describe(self) -> str:
        what = f"instruction {self.tick} (<INPUT B={self.variant}> {_INPUT_KINDS[self.variant]}"
        what += f" {self.name!r}" if self.name else (", unnamed" if self.variant == 0 else "")
        what += f", feeds[{self.position}])"
        if self.variant == 0 and not self.name:
            what += (": no DATA name — reference-compiled files turn buffers and lifted tensors "
                     "into unnamed inputs; supply it through feeds")
        if self.variant == 3:
            if is_tensor_placeholder(self.stored):
                what += (f": CNST #{self.const_id} holds only the compiler's placeholder "
                         f"{self.stored!r} (the tensor was not stored; shape and dtype unknown)")
            else:
                what += f": CNST #{self.const_id} = {self.stored!r}"
        return what


def input_slots(nac: NacFile) -> list[InputSlot]:
    """The values a caller supplies, in instruction order (= ``feeds`` order): every
    ``<INPUT B=0>`` and ``<INPUT B=3>``, with its name and, for B=3, its stored constant."""
    names = nac.input_name_map
    slots: list[InputSlot] = []
    for ins in nac.instructions:
        if ins.a == OP_INPUT and ins.b in (0, 3):
            cid = ins.const_ids[0] if ins.b == 3 and ins.const_ids else None
            const = nac.constants.get(cid) if cid is not None else None
            slots.append(InputSlot(ins.index, ins.b, len(slots), names.get(ins.index), cid,
                                   const.value if const else None))
    return slots


def _shape_text(shape) -> str:
    return "x".join(str(int(d)) for d in shape) if len(shape) else "a scalar"


def _to_tensor(v: Any, device: torch.device) -> Any:
    """Caller-supplied value → torch (a copy: in-place ATen ops must not touch the caller's
    arrays). Python scalars stay Python scalars, like constants."""
    if isinstance(v, torch.Tensor):
        return v.detach().to(device).clone()
    if isinstance(v, (bool, int, float, complex)):
        return v
    arr = np.asarray(v)
    if arr.dtype == object:
        raise TypeError(f"cannot convert {type(v).__name__} to a tensor")
    return torch.from_numpy(np.array(arr, copy=True)).to(device)


class Session:
    """One execution context for a NAC file.

    ``Session(nacfile, inputs=None, feeds=None, *, states=None, device="cpu")``;
    ``session.run()`` returns ``session.outputs`` (list of numpy arrays). ``nacfile`` may also
    be a path. ``results`` maps tick → value of the instructions executed so far in the
    current run; ``tick`` is the next instruction to execute; ``finished`` is set by
    ``<OUTPUT B=0>`` or the end of the stream.

    Preparing is cheap: weights are read (memory-mapped, dequantised) when an instruction
    first loads them and kept for the session's later runs; each instruction's kernel,
    argument template and schema binding are prepared on its first execution
    (:mod:`.prepared`). :meth:`run` drops each value after its last reader has run (the
    fx Interpreter's last-use freeing), so a run's memory stays near the model's live set;
    ``keep_results=True`` keeps every value in ``results`` (stepping with
    :meth:`run_instruction` never drops anything). :meth:`run` also sets the kernels'
    thread count for the machine's load (:mod:`.threads`); ``manage_threads=False`` leaves
    torch's setting alone.
    """

    keep_results: bool = False
    manage_threads: bool = True

    def __init__(self, nacfile: NacFile | str | Path, inputs: Optional[Mapping[str, Any]] = None,
                 feeds: Optional[Sequence[Any]] = None, *, states: Optional[Mapping[int, Any]] = None,
                 device: str | torch.device = "cpu", kernels: Optional[Kernels] = None,
                 keep_results: Optional[bool] = None, manage_threads: Optional[bool] = None):
        self._owns_file = not isinstance(nacfile, NacFile)
        if self._owns_file:
            nacfile = read(str(nacfile))
        self.nac = nacfile
        self.device = torch.device(device)
        self.kernels = kernels or _shared_kernels(self.device)
        self.instructions = nacfile.instructions
        self.slots: list[InputSlot] = input_slots(nacfile)
        branches = any(ins.a == OP_CONTROL_FLOW for ins in self.instructions)
        self._slot_at = {s.tick: s for s in self.slots}
        self._feeds: dict[int, Any] = {}
        self._named: dict[int, Any] = {}
        self._params: dict[int, torch.Tensor] = {}
        self.states: dict[int, Any] = {}
        self._set_inputs(inputs, feeds, states)
        self._check_input_shapes()
        self.results: dict[int, Any] = {}
        self.outputs: Optional[list[np.ndarray]] = None
        self.output_values: list = []
        self.sub_outputs: list[list[Any]] = []
        self.branch_taken: dict[int, bool] = {}
        self._gates = self._branch_gates(self.instructions) if branches else {}
        self.tick = 0
        self.finished = False
        if keep_results is not None:
            self.keep_results = keep_results
        if manage_threads is not None:
            self.manage_threads = manage_threads
        self._prepared: dict[int, PreparedCall] = {}
        self._shared_prepared = False       # prepare_all() has looked up the shared plans
        self._const_keys: dict[int, tuple] = {}
        # the file's bytes are this session's own copy (it opened the file, read whole): weights
        # may be used where they lie (runtime/stored_weights.py)
        self._own_bytes = self._owns_file and nacfile.private_buffer
        self._shares_weights: Optional[bool] = None      # see weights_shared()
        self._mapped_storages: set[int] = set()          # data pointers of weights over a mapping
        # weights are held for the session's life (a second run, a step back, reads none again)
        # unless they are too many to hold: then each is read at its use and released after
        # its last one, with the values the run no longer needs (an LLM's 4-30 GB)
        self.holds_weights = weight_bytes(nacfile) <= RESIDENT_WEIGHTS_MAX
        self._dead_after: Optional[dict[int, list]] = None
        # the kernels' thread count (threads.py) is chosen when kernels are about to run: by run(),
        # or by the first run_instruction of a session that is stepped (the debugger)
        self._threads_chosen = not self.manage_threads

    def close(self) -> None:
        """Close the file if this session opened it from a path."""
        if self._owns_file:
            self.nac.close()

    def share_loaded(self, other: "Session") -> None:
        """Use ``other``'s loaded weights and prepared calls from now on (one store for both):
        a session for new inputs of the same file need not read and dequantise the weights
        again (the Studio's debugger, when the user changes the inputs). Neither depends on the
        inputs: a prepared call re-checks its arguments on every call."""
        if other.nac is not self.nac or other.device != self.device or other.kernels is not self.kernels:
            raise ValueError("share_loaded: the sessions run different files, devices or kernels")
        self._params = other._params
        self.holds_weights = other.holds_weights
        self._prepared = other._prepared
        self._shared_prepared = other._shared_prepared

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- inputs ---------------------------------------------------------------------------
    def _set_inputs(self, inputs, feeds, states) -> None:
        if feeds is not None:
            feeds = list(feeds)
            if len(feeds) > len(self.slots):
                raise NacRuntimeError(
                    f"{len(feeds)} feeds given, but the file has {len(self.slots)} <INPUT B=0>/<INPUT B=3> "
                    f"instructions: " + "; ".join(s.describe() for s in self.slots))
            for slot, v in zip(self.slots, feeds):
                if v is not None:
                    self._feeds[slot.tick] = _to_tensor(v, self.device)
        if inputs:
            if not isinstance(inputs, Mapping):
                raise TypeError("inputs must map names to values; use feeds for positional values")
            by_name: dict[str, list[int]] = {}
            for n in self.nac.input_names:
                by_name.setdefault(n.name, []).append(n.index)
            unknown = [k for k in inputs if k not in by_name]
            if unknown:
                known = ", ".join(repr(k) for k in by_name) or "none"
                raise NacRuntimeError(f"unknown input name(s) {', '.join(map(repr, unknown))}; "
                                      f"the file names: {known}")
            for k, v in inputs.items():
                for tick in by_name[k]:
                    self._named[tick] = _to_tensor(v, self.device)
        for sid, v in (states or {}).items():
            self.states[int(sid)] = _to_tensor(v, self.device)

    def _check_input_shapes(self) -> None:
        """A named input of another shape than the file's input signature records fails here,
        saying both, not deep inside the first kernel that meets it (a compiled program's shapes
        are fixed: its view and reshape constants were computed for the recorded ones)."""
        if not (self._feeds or self._named):
            return
        try:
            specs = read_input_signature(self.nac)
        except NacFormatError:          # verify reports a broken signature; the run goes on without it
            return
        by_name = {s.name: s for s in specs or () if s.kind == "input"}
        for slot in self.slots:
            spec = by_name.get(slot.name) if slot.name else None
            value = self._feeds.get(slot.tick, self._named.get(slot.tick))
            if spec is None or not isinstance(value, torch.Tensor) or tuple(value.shape) == tuple(spec.shape):
                continue
            got = str(value.dtype).removeprefix("torch.")
            raise InputShapeError(f"input {slot.name!r} expects {_shape_text(spec.shape)} {spec.dtype}, got "
                                  f"{_shape_text(value.shape)} {got}: the file was compiled for that shape; "
                                  f"give a value of that shape (or compile again for this one)")

    def missing_inputs(self) -> list[InputSlot]:
        """The B=0/B=3 values that neither feeds, inputs nor CNST provide."""
        return [s for s in self.slots if self._input_value(s) is _MISSING]

    def _input_value(self, slot: InputSlot) -> Any:
        if slot.tick in self._feeds:
            return self._feeds[slot.tick]
        if slot.tick in self._named:
            return self._named[slot.tick]
        if slot.variant == 3 and slot.const_id is not None and not is_tensor_placeholder(slot.stored) \
                and slot.const_id in self.nac.constants:
            return slot.stored
        return _MISSING

    def missing_input_error(self) -> Optional[MissingInputError]:
        """The error a run would raise for inputs nobody supplied (None when all are there)."""
        missing = self.missing_inputs()
        return self._missing_error(missing) if missing else None

    def _missing_error(self, missing: list[InputSlot]) -> MissingInputError:
        lines = "\n  ".join(s.describe() for s in missing)
        return MissingInputError(f"{len(missing)} input value(s) missing:\n  {lines}", missing)

    # -- running ----------------------------------------------------------------------------
    def reset(self) -> None:
        """Start a new run: results are dropped; parameters, inputs and state are kept."""
        self.results = {}
        self.outputs = None
        self.output_values = []
        self.sub_outputs = []
        self.branch_taken = {}
        self.tick = 0
        self.finished = False

    def run(self) -> list[np.ndarray]:
        """Run from the start to ``<OUTPUT B=0>`` (or the end of the stream)."""
        missing = self.missing_inputs()
        if missing:
            raise self._missing_error(missing)
        self.reset()
        if self.manage_threads:
            threads.apply()
            self._threads_chosen = True
        if self.keep_results:
            while not self.finished:
                self.run_instruction(self.tick)
            return self.outputs
        dead = self.dead_values()
        if not self._gates and _plain_kinds(type(self)):
            return self._run_direct(dead)
        results = self.results
        instructions = self.instructions
        n = len(instructions)
        # Regular ops of a stream without branches go straight to call_op (what run_instruction
        # would do for them); a subclass that overrides run_instruction gets every call.
        direct = not self._gates and type(self).run_instruction is Session.run_instruction
        call_op = self.call_op
        while not self.finished:
            i = self.tick
            ins = instructions[i] if i < n else None
            if direct and ins is not None and ins.a >= 10:
                results[i] = call_op(ins)
                self.tick = i + 1
                if self.tick >= n:
                    self._finish([])
            else:
                self.run_instruction(i)
            drop = dead.get(i)
            if drop is not None:
                for v in drop:
                    results.pop(v, None)
        return self.outputs

    def _run_direct(self, dead: dict) -> list:
        """:meth:`run` for a branch-free stream and a session whose instruction kinds are
        Session's own: what run_instruction/call_op do, in one loop with the lookups bound
        once (the interpreter's cost per instruction is what a small model's run is made of).
        Parameters load through load_param, the other system instructions through
        run_instruction; a regular op calls its prepared binding directly."""
        results = self.results
        instructions = self.instructions
        prepared = self._prepared
        self.prepare_all()
        prepare = self.prepare
        load_param = self.load_param
        n = len(instructions)
        i = 0
        try:
            while i < n:
                ins = instructions[i]
                if ins.a >= 10:
                    call = prepared.get(i)
                    if call is None:
                        call = prepare(ins)
                    fast = call.fast
                    try:
                        value = fast(results) if fast is not None else SLOW
                        if value is SLOW:
                            value = call(self._prepared_arguments(ins, call))
                    except NacRuntimeError:
                        raise
                    except Exception as e:
                        # a value missing raises here (before the kernel ran) with its precise
                        # error; the arguments are still in results to describe the failure
                        args = self._prepared_arguments(ins, call)
                        raise self._kernel_failure(ins, call.name, args, e) from \
                            (None if isinstance(e, InexactCoercion) else e)
                    results[i] = value
                elif ins.a == OP_INPUT and ins.b == 1:
                    results[i] = load_param(ins)
                else:
                    self.run_instruction(i)
                    if self.finished:
                        break
                drop = dead.get(i)
                if drop is not None:
                    for v in drop:
                        results.pop(v, None)
                i += 1
        except BaseException:
            self.tick = i
            raise
        if self.finished:
            drop = dead.get(i)
            if drop is not None:
                for v in drop:
                    results.pop(v, None)
        else:
            self.tick = n
            self._finish([])
        return self.outputs

    def execute(self, i: int) -> Any:
        """Execute instruction ``i`` at run()'s cost and return its result: a regular op of a
        branch-free stream through its prepared call (what :meth:`run`'s direct loop does),
        anything else, and everything for a subclass that overrides an instruction kind,
        through :meth:`run_instruction`. For steppers (the debugger's Continue): ``results``,
        ``tick`` and ``finished`` end as run_instruction leaves them; errors are its errors."""
        ins = self.instructions[i] if i < len(self.instructions) else None
        if ins is None or self._gates or not _plain_kinds(type(self)) \
                or ins.a < 10 and not (ins.a == OP_INPUT and ins.b == 1):
            return self.run_instruction(i)
        if not self._threads_chosen:            # as run_instruction: before the first kernel
            self._threads_chosen = True
            threads.apply()
        if ins.a < 10:
            value = self.load_param(ins)        # a weight, as _run_direct loads it
        else:
            call = self._prepared.get(i)
            if call is None:
                call = self.prepare(ins)
            fast = call.fast
            try:
                value = fast(self.results) if fast is not None else SLOW
                if value is SLOW:
                    value = call(self._prepared_arguments(ins, call))
            except NacRuntimeError:
                raise
            except Exception as e:  # as in _run_direct: a missing value raises its precise error here
                args = self._prepared_arguments(ins, call)
                raise self._kernel_failure(ins, call.name, args, e) from \
                    (None if isinstance(e, InexactCoercion) else e)
        self.results[i] = value
        self.tick = i + 1
        if self.tick >= len(self.instructions) and not self.finished:
            self._finish([])
        return value

    def dead_values(self) -> dict[int, list]:
        """tick → values nothing reads after that tick (from the file's def-use index):
        a value goes after its last reader, an unread value right after it is computed.
        Graph outputs that nobody reads stay (``output_values`` holds them anyway)."""
        if self._dead_after is None:
            du = self.nac.def_use()
            # last_uses() hands out fresh lists; a reference outside the stream (a damaged file)
            # is dropped like any other (results.pop with a default)
            dead: dict[int, list[int]] = du.last_uses()
            read, outputs = du.read_values(), du.outputs
            for v in range(du.n):
                if v not in read and v not in outputs:
                    vs = dead.get(v)
                    if vs is None:
                        dead[v] = [v]
                    else:
                        vs.append(v)
            self._dead_after = dead
        return self._dead_after

    def run_instruction(self, i: int) -> Any:
        """Execute instruction ``i``, store and return its result, advance ``tick``."""
        if not self._threads_chosen:
            self._threads_chosen = True
            threads.apply()
        if i >= len(self.instructions):
            self._finish([])
            return None
        ins = self.instructions[i]
        skipped_by = self._not_taken(i) if self._gates else None
        if skipped_by is not None:
            value = NotTaken(skipped_by)
        elif ins.a == OP_INPUT:
            value = getattr(self, _INPUT_LOADERS.get(ins.b, "_unsupported_input"))(ins)
        elif ins.a == OP_OUTPUT:
            value = self.emit_output(ins)
        elif ins.a == OP_CONTROL_FLOW:
            value = self.branch(ins)
        elif ins.a == OP_CONVERGENCE:
            raise NotSupported("<CONVERGENCE> (A=7): the spec names its fields (threshold, input, "
                               "branch offsets) but not how branches are merged, so it cannot be "
                               "executed faithfully", i)
        elif ins.a == 0:
            raise NotSupported("A=0 (<NONE>): the compiler could not resolve this node (v1.6 "
                               "writes every get_attr/folded constant this way); its value is not "
                               "in the file", i)
        elif ins.a < 10:
            raise NotSupported(f"system op A={ins.a} is not defined by the spec", i)
        else:
            value = self.call_op(ins)
        self.results[i] = value
        self.tick = i + 1
        if self.tick >= len(self.instructions) and not self.finished:
            self._finish([])
        return value

    # -- control flow ------------------------------------------------------------------------
    # Seed 000 §7.3.1 gives <CONTROL_FLOW> the structure C=[3, true_len, false_len],
    # D=[predicate offset]: the true branch is the next true_len instructions, the false branch
    # the false_len after it. We execute exactly that: the branch not taken is stepped over
    # as ``NotTaken`` placeholders (ticks stay one per instruction, so stepping, history and
    # MMAP ticks keep their meaning). The spec does not say how a value computed in only one
    # branch reaches later code (there is no phi), so reading a NotTaken value is NotSupported;
    # a branch hands a value on through <OUTPUT B=1> (§7.2.2), whose result is that value.

    @staticmethod
    def _branch_gates(instructions: Sequence[Instruction]) -> dict[int, list[tuple[int, bool]]]:
        """tick → [(control tick, side)] for every instruction inside a branch, outermost first."""
        gates: dict[int, list[tuple[int, bool]]] = {}
        n = len(instructions)
        for ins in instructions:
            if ins.a != OP_CONTROL_FLOW:
                continue
            c = ins.c or ()
            if len(c) != 3 or c[1] < 0 or c[2] < 0 or ins.index + c[1] + c[2] >= n:
                continue   # reported when the instruction executes
            start = ins.index + 1
            for j in range(start, start + c[1]):
                gates.setdefault(j, []).append((ins.index, True))
            for j in range(start + c[1], start + c[1] + c[2]):
                gates.setdefault(j, []).append((ins.index, False))
        return gates

    def _not_taken(self, i: int) -> Optional[int]:
        """The control tick whose untaken branch holds ``i`` (None if ``i`` runs)."""
        for ctl, side in self._gates.get(i, ()):
            if self.branch_taken.get(ctl) is not side:
                return ctl
        return None

    def branch(self, ins: Instruction) -> bool:
        i = ins.index
        c, d = ins.c or (), ins.d or ()
        if len(c) != 3 or c[0] != 3 or len(d) != 1:
            raise NotSupported(f"<CONTROL_FLOW> needs C=[3, true_len, false_len] and D=[predicate "
                               f"offset]; this one has C={list(c)} D={list(d)}", i)
        t_len, f_len = c[1], c[2]
        if t_len < 0 or f_len < 0 or i + t_len + f_len >= len(self.instructions):
            raise NotSupported(f"<CONTROL_FLOW> branches of {t_len} and {f_len} instructions do "
                               f"not fit in the {len(self.instructions)}-instruction stream", i)
        end = i + t_len + f_len
        for j in range(i + 1, end + 1):
            if self.instructions[j].a == OP_CONTROL_FLOW:
                jc = self.instructions[j].c or ()
                if len(jc) == 3 and j + jc[1] + jc[2] > end:
                    raise NotSupported(f"<CONTROL_FLOW> at {j} overlaps the branches of {i} without "
                                       f"nesting inside them", i)
        src = i + d[0]
        if d[0] >= 0 or src not in self.results:
            raise NacRuntimeError(f"instruction {i}: <CONTROL_FLOW> predicate offset {d[0]} does "
                                  f"not refer to an executed instruction")
        pred = first_of_multi(self.results[src])
        if isinstance(pred, NotTaken):
            raise NotSupported(f"<CONTROL_FLOW> predicate is instruction {src}, which was not "
                               f"executed (branch not taken at {pred.control})", i)
        if isinstance(pred, torch.Tensor):
            if pred.numel() != 1:
                raise NacRuntimeError(f"instruction {i}: <CONTROL_FLOW> predicate (instruction "
                                      f"{src}) has {pred.numel()} elements; a branch needs one")
            pred = pred.item()
        if not isinstance(pred, (bool, int, float)):
            raise NacRuntimeError(f"instruction {i}: <CONTROL_FLOW> predicate (instruction {src}) "
                                  f"is {type(pred).__name__}, not a boolean")
        taken = bool(pred)
        self.branch_taken[i] = taken
        return taken

    # -- instruction kinds (override points) ------------------------------------------------
    def load_input(self, ins: Instruction) -> Any:
        v = self._input_value(self._slot_at[ins.index])
        if v is _MISSING:
            raise self._missing_error([self._slot_at[ins.index]])
        return v

    load_lifted = load_input

    def load_param(self, ins: Instruction) -> torch.Tensor:
        pid = ins.c[1] if ins.c and len(ins.c) >= 2 else None
        t = self._params.get(pid)
        if t is None:
            p = self.nac.params.get(pid)
            if p is None:
                raise NacRuntimeError(f"instruction {ins.index}: <INPUT B=1> refers to parameter "
                                      f"{pid}, which DATA does not list")
            t = self.weight(p)
        return t

    def weight(self, p) -> torch.Tensor:
        """Parameter ``p``'s tensor as the kernels use it: held once read, or read afresh each
        time when the session does not hold weights (:attr:`holds_weights`)."""
        t = self._params.get(p.id)
        if t is None:
            t = self._param_tensor(p)
            if self.holds_weights:
                self._params[p.id] = t
        return t

    def weights_shared(self) -> bool:
        """Whether weights may be used where they lie, without a copy of their own: over the
        caller's decoded file, its memory mapping, or a compiled model's own tensors. True when
        no op of the file writes into an argument (exported programs are functional; a file
        with ``add_`` or an ``out=`` overload gets copies, so a kernel never writes into the
        caller's bytes or a read-only mapping)."""
        if self._shares_weights is None:
            names = self.nac.op_names
            used = {ins.a for ins in self.instructions if ins.a >= 10}
            self._shares_weights = not any(
                self.kernels.writes_an_argument(names[a]) for a in used if a in names)
        return self._shares_weights

    def _param_tensor(self, p, stored: Optional[tuple] = None) -> torch.Tensor:
        """``p``'s weight as the kernels use it; ``stored``: (its raw_tensor(), its metadata) when
        already read from external weights."""
        meta = p.meta
        native = None
        if self.nac.header.quant_method == QUANT_NONE and meta is not None and meta.quant == QUANT_NONE:
            native = _NATIVE_FLOAT.get(meta.dtype)
        if meta is not None and p._payload is None and p.data_offset >= 0 and used_as_stored(meta, native):
            t = None
            if self._own_bytes or (self.nac.private_buffer and self.weights_shared()):
                t = stored_tensor(p, self.nac._buf, native)
            elif p.data_offset % _MAPPED_ALIGN == 0 and is_mapped(self.nac) and self.weights_shared():
                t = mapped_tensor(p, self.nac._buf, current_size(self.nac), native)
                self._mapped_storages.add(t.untyped_storage().data_ptr())
            if t is not None:
                return t if self.device.type == "cpu" else t.to(self.device)
        if stored is None:
            arr = raw_tensor(p)     # an external weight's read sets p.meta
        else:
            arr, p.meta = stored
        if native not in (torch.float64, torch.float16) and p.meta is not None:
            arr = dequantize(arr, p.meta)   # else the stored values, not the float32 widening
        if not arr.flags.writeable and self.weights_shared():
            with warnings.catch_warnings():      # read-only bytes no kernel of this file writes to
                warnings.simplefilter("ignore", UserWarning)
                t = torch.from_numpy(arr)
        elif not (arr.flags.owndata and arr.flags.writeable) and not is_read_copy(arr) \
                and not self.weights_shared():
            # a view of the file's bytes (or of caller bytes): in-place ops must not reach it
            # (a mapped file's weights are fresh pread copies, used as they are). Dequantised arrays are already this session's own, and are not copied again.
            # A big tensor is copied by torch with the GIL released (numpy's copy holds it:
            # loading GPT-2's 150 MB embedding in the Studio's debugger thread froze the UI for
            # ~100 ms); a small one by numpy, without torch's read-only warning to silence
            # (catching warnings costs more than copying a small tensor).
            if arr.nbytes <= _NUMPY_COPY_MAX:
                t = torch.from_numpy(arr.copy())
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)   # read-only source, cloned at once
                    t = torch.from_numpy(arr).clone()
        else:
            t = torch.from_numpy(arr)
        if self.device.type != "cpu":
            t = t.to(self.device)
        return t.to(native) if native is not None and t.dtype != native else t

    def load_state(self, ins: Instruction) -> Any:
        sid = ins.c[1] if ins.c and len(ins.c) >= 2 else None
        if sid not in self.states:
            name = self.nac.input_name_map.get(ins.index)
            if name is not None and ins.index in self._named:
                self.states[sid] = self._named[ins.index]
            else:
                raise MissingInputError(
                    f"instruction {ins.index} (<INPUT B=2> state {sid}"
                    + (f" {name!r}" if name else "") + "): no initial value; pass states={"
                    f"{sid}: value}}" + (f" or inputs={{{name!r}: value}}" if name else ""), [])
        return self.states[sid]

    def _unsupported_input(self, ins: Instruction):
        raise NotSupported(f"<INPUT B={ins.b}> is not an OPS input variant (4 and 5 exist only in "
                           f"TRNG)", ins.index)

    def emit_output(self, ins: Instruction) -> Any:
        values = [self._read(ins, p) for p in ins.producers()]
        if ins.b == 0:
            self._finish(values)
        elif ins.b == 1:
            # Subgraph return (§7.2.2): does not end the run; its result is the returned value,
            # which is how a <CONTROL_FLOW> branch hands a value to later instructions.
            self.sub_outputs.append(values)
            return values[0] if len(values) == 1 else tuple(values)
        else:
            raise NotSupported(f"<OUTPUT B={ins.b}> exists only in TRNG", ins.index)
        return None

    def _read(self, ins: Instruction, producer: int) -> Any:
        if producer not in self.results:
            raise NacRuntimeError(f"instruction {ins.index}: argument refers to instruction "
                                  f"{producer}, which has no result (yet)")
        v = self.results[producer]
        if isinstance(v, NotTaken):
            raise NotSupported(f"reads instruction {producer}, which is in the branch not taken at "
                               f"<CONTROL_FLOW> {v.control}; the spec defines no merge of branch "
                               f"values", ins.index)
        return v

    def _finish(self, values: list) -> None:
        self.output_values = list(values)
        self.outputs = self.convert_outputs(self.output_values)
        self.finished = True

    def convert_outputs(self, values: list) -> list:
        """What ``outputs`` holds: numpy arrays. Override to keep tensors (a shape-only
        session on the meta device has no data to convert); ``output_values`` always holds
        the raw values."""
        if self._mapped_storages:      # an output that is (a view of) a mapped weight: the caller's own copy
            values = [v.clone() if isinstance(v, torch.Tensor) and v.untyped_storage().data_ptr()
                      in self._mapped_storages else v for v in values]
        return [to_numpy(v) for v in values]

    def gather(self, ins: Instruction) -> list:
        """Seed 000 §8.3: D ≠ 0 → results[i + D]; D == 0 → the next constant of C."""
        sig = self.nac.signature(ins)
        if sig is None:
            raise NacRuntimeError(f"instruction {ins.index}: PERM has no signature {ins.b}")
        d = ins.d or ()
        if len(d) != len(sig):
            raise NacRuntimeError(f"instruction {ins.index}: signature {sig!r} has {len(sig)} "
                                  f"arguments but D has {len(d)}")
        keep_tuples = self.nac.op_name(ins.a) in ("getitem", "operator.getitem")
        args = []
        for arg in self.nac.arguments(ins):
            if arg.kind == "ref":
                v = self._read(ins, arg.producer)
                args.append(v if keep_tuples else first_of_multi(v))
            else:
                args.append(self._constant_argument(ins, len(args) + 1, arg))
        return args

    def _constant_argument(self, ins: Instruction, position: int, arg) -> Any:
        if arg.const_id is None or arg.const_id not in self.nac.constants:
            raise NacRuntimeError(f"instruction {ins.index}: constant argument "
                                  + ("beyond the ids in C" if arg.const_id is None
                                     else f"#{arg.const_id} is not in CNST"))
        if is_tensor_placeholder(arg.value):
            raise NotSupported(f"constant #{arg.const_id} is the compiler's placeholder "
                               f"{arg.value!r}: the tensor's data is not in the file",
                               ins.index)
        return self._used_constant(ins, position, arg)

    def _used_constant(self, ins: Instruction, position: int, arg) -> Any:
        """The stored constant as the op uses it (``position``: 1-based, as dis counts): exact coercion by signature code (``1.0`` under
        ``i`` is dim 1; see ``isa/coerce.py``)."""
        try:
            return as_used(arg.value, arg.code)
        except InexactCoercion as e:
            raise CoercionError(ins.index, self.nac.op_name(ins.a),
                                f"{position} (signature code {arg.code!r})", arg.value,
                                e.wanted.__name__) from None

    def prepare(self, ins: Instruction) -> PreparedCall:
        """The instruction's kernel and argument template, built on its first execution and
        kept for the session (constants resolved and coerced once; see :mod:`.prepared`).
        Raises what :meth:`gather` and kernel lookup raise."""
        call = self._prepared.get(ins.index)
        if call is not None:
            return call
        name = self.nac.op_name(ins.a)
        sig = self.nac.signature(ins)
        # the call's plan (kernel, constants in place, binding recipes) is shared by every
        # instruction with the same op, signature, D and constant values, in any session
        key = None
        if sig is not None and ins.d is not None and len(ins.d) == len(sig):
            consts = self._constant_keys(ins)
            if consts is not None:
                key = (self.kernels, name, sig, ins.d, consts)
                plan = shared_plan(key)
                if plan is not None:
                    i = ins.index
                    call = self._prepared[i] = PreparedCall.of_plan(plan, tuple(i + dv for dv in ins.d if dv))
                    return call
        if sig is None:
            raise NacRuntimeError(f"instruction {ins.index}: PERM has no signature {ins.b}")
        d = ins.d or ()
        if len(d) != len(sig):
            raise NacRuntimeError(f"instruction {ins.index}: signature {sig!r} has {len(sig)} "
                                  f"arguments but D has {len(d)}")
        # The template straight from D and C (what NacFile.arguments resolves, without an
        # Argument object per value): a constant already of the type its code wants is taken
        # as it is; anything else goes through the checks and exact coercion.
        template = []
        i = ins.index
        cids = ins.c[1:] if ins.c else ()
        constants = self.nac.constants
        k = 0
        for code, dv in zip(sig, d):
            if dv:
                template.append((True, i + dv))
                continue
            cid = cids[k] if k < len(cids) else None
            k += 1
            const = constants.get(cid) if cid is not None else None
            value = const.value if const is not None else None
            wanted = CODE_TYPES.get(code)
            if const is None or (type(value) is not wanted if wanted is not None else
                                 isinstance(value, str) and is_tensor_placeholder(value)):
                value = self._constant_argument(ins, len(template) + 1, Argument(code, "const", const_id=cid,
                                                                              value=value))
            template.append((False, value))
        try:
            fn = self.kernels(name)
        except NotSupported as e:
            raise NotSupported(str(e), ins.index) from None
        call = self._prepared[ins.index] = PreparedCall(
            name, fn, template, name in ("getitem", "operator.getitem"))
        if key is not None:
            keep_plan(key, call.plan)
        return call

    def prepare_all(self, weights: bool = True) -> None:
        """Before many instructions run in a row (run()'s loop, a debugger's Continue): every
        shared call plan, and with ``weights`` the stream's weights when the session holds them,
        each in one pass (cheaper than the same work spread over the instructions; what fails is
        left for its tick, which raises it there)."""
        if not self._shared_prepared:
            self._shared_prepared = True
            self._prepare_shared()
        if weights and not self._params and self.holds_weights:
            self._load_params()

    def _load_params(self) -> None:
        """Every weight the stream loads, in one pass before a first run (one loop is markedly
        cheaper than the same work spread between the kernels). A weight that fails to load is
        left for :meth:`load_param` at its tick, which raises the error there."""
        params = self._params
        by_id = self.nac.params
        wanted = [by_id[ins.c[1]] for ins in self.instructions
                  if ins.a == OP_INPUT and ins.b == 1 and ins.c and len(ins.c) >= 2 and ins.c[1] in by_id]
        external = [p for p in wanted if p._payload is None and (p.meta is None or p.data_offset < 0)]
        stored = external_raw_tensors(self.nac, external) if external and self.nac.weights_path else {}
        for p in wanted:
            if p.id not in params:
                try:
                    params[p.id] = self._param_tensor(p, stored.get(p.id))
                except Exception:       # noqa: BLE001 - raised again at its tick, by load_param
                    pass

    def _prepare_shared(self) -> None:
        """:meth:`prepare`'s shared-plan path for the whole stream in one pass, before a first run:
        every regular instruction whose call plan an earlier session made is prepared here (one
        loop, the lookups bound once); the others are prepared when the run reaches them, so an
        error there still belongs to its tick."""
        prepared = self._prepared
        op_names = self.nac.op_names
        perms = self.nac.perms
        kernels = self.kernels
        constant_keys = self._constant_keys
        of_plan = PreparedCall.of_plan
        for ins in self.instructions:
            if ins.a < 10:
                continue
            name = op_names.get(ins.a)
            b, d = ins.b, ins.d
            sig = perms.get(b, "" if b == 0 else None)
            if name is None or sig is None or d is None or len(d) != len(sig):
                continue
            consts = constant_keys(ins) if ins.c else ()
            plan = shared_plan((kernels, name, sig, d, consts)) if consts is not None else None
            if plan is not None:
                i = ins.index
                prepared[i] = of_plan(plan, tuple([i + dv for dv in d if dv]))

    def _constant_keys(self, ins: Instruction) -> Optional[tuple]:
        """The constants of C by type and value (None when one is not in CNST: the general path
        reports it)."""
        if not ins.c:
            return ()
        known = self._const_keys
        constants = self.nac.constants
        out = []
        for cid in ins.c[1:]:
            k = known.get(cid)
            if k is None:
                const = constants.get(cid)
                if const is None:
                    return None
                k = known[cid] = constant_key(const)
            out.append(k)
        return tuple(out)

    def _prepared_arguments(self, ins: Instruction, call: PreparedCall) -> list:
        results = self.results
        out = call.base.copy() if call.base is not None else [None] * len(call.refs)
        keep = call.keep_tuples
        for k, x in zip(call.refs, call.producers):
            v = results.get(x, _MISSING)
            if v is _MISSING or isinstance(v, NotTaken):
                v = self._read(ins, x)          # raises the precise error
            out[k] = v if keep else first_of_multi(v)
        return out

    def call_op(self, ins: Instruction) -> Any:
        call = self.prepare(ins)
        name, fn = call.name, call
        args = self._prepared_arguments(ins, call)
        try:
            return fn(args)
        except NacRuntimeError:
            raise
        except InexactCoercion as e:
            raise self._kernel_failure(ins, name, args, e) from None
        except Exception as e:
            raise self._kernel_failure(ins, name, args, e) from e

    @staticmethod
    def _kernel_failure(ins: Instruction, name: str, args: list, e: Exception) -> NacRuntimeError:
        """The error a kernel's exception becomes: an inexact constant names the argument and
        both types; anything else is the op's failure with its arguments described."""
        if isinstance(e, InexactCoercion):
            return CoercionError(ins.index, name, e.where, e.value, e.wanted.__name__)
        return KernelError(f"instruction {ins.index}: {name}({describe_args(args)}) failed: "
                           f"{type(e).__name__}: {e}", ins.index, name)


def _plain_kinds(cls: type) -> bool:
    """Whether ``cls`` runs every instruction kind as Session does (then :meth:`Session.run`
    may take its direct loop; a subclass that overrides one gets every call through it)."""
    ok = _PLAIN_KINDS.get(cls)
    if ok is None:
        ok = _PLAIN_KINDS[cls] = all(getattr(cls, m) is getattr(Session, m) for m in _KIND_METHODS)
    return ok


_KIND_METHODS = ("run_instruction", "call_op", "prepare", "load_param", "load_input", "load_lifted",
                 "load_state", "emit_output", "_prepared_arguments")
_PLAIN_KINDS: dict = {}

#: Parameters up to this size are copied out of the mapping by numpy (the GIL held for at
#: most ~100 µs), bigger ones by torch with the GIL released.
_NUMPY_COPY_MAX = 1 << 20
_MAPPED_ALIGN = 64       # a record used over the mapping starts where torch's allocator would put it

_KERNELS: dict[torch.device, Kernels] = {}
# <INPUT B=...> -> the Session method that loads it
_INPUT_LOADERS = {0: "load_input", 1: "load_param", 2: "load_state", 3: "load_lifted"}


def _shared_kernels(device: torch.device) -> Kernels:
    """One kernel table per device for the process: kernels hold no per-run state, so a new
    session need not resolve every op name again."""
    k = _KERNELS.get(device)
    if k is None:
        k = _KERNELS[device] = Kernels(device)
    return k


class NotTaken:
    """Result placeholder of an instruction in a <CONTROL_FLOW> branch that was not taken."""
    __slots__ = ("control",)

    def __init__(self, control: int):
        self.control = control

    def __repr__(self) -> str:
        return f"<not taken: branch of {self.control}>"

    def __eq__(self, other) -> bool:
        return isinstance(other, NotTaken) and other.control == self.control

    def __hash__(self) -> int:
        return hash(("NotTaken", self.control))


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


#: Weights together above this many bytes are not held by a session (``Session.holds_weights``).
RESIDENT_WEIGHTS_MAX = 1 << 30


def can_hold(nbytes: int) -> bool:
    """Whether ``nbytes`` of weights may be held for a run that repeats (a generation's decode
    step): they fit in half the memory the system says is available now (``MemAvailable``), so
    holding them cannot push the machine into swap. Reading them again at every step costs
    their whole size in reads per token (4.4 GB for a 1.1B-parameter model in float32)."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return nbytes <= int(line.split()[1]) * 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    return nbytes <= RESIDENT_WEIGHTS_MAX


def weight_bytes(nac: NacFile) -> int:
    """The bytes of ``nac``'s stored weights: its tensor records, or its external file's size."""
    if nac.header.weights_internal:
        return sum(p.data_length for p in nac.params.values())
    try:
        return os.path.getsize(nac.weights_path) if nac.weights_path else 0
    except OSError:
        return 0


def run(nacfile: NacFile | str | Path, inputs: Optional[Mapping[str, Any]] = None,
        feeds: Optional[Sequence[Any]] = None, **kwargs) -> list[np.ndarray]:
    """Run a file once and return its outputs as numpy arrays."""
    with Session(nacfile, inputs=inputs, feeds=feeds, **kwargs) as session:
        return session.run()
