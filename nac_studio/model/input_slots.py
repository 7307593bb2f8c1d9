"""Every value a run of a file needs, in order: its ``<INPUT B=0>`` and ``<INPUT B=3>`` slots,
named and typed from the file's input signature when it records one (Qt-free, torch-free).
The debug session asks the user for them; the engine host matches another file's inputs to them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from nac_engine.format.model import NacFile
from nac_engine.isa.optable import OP_INPUT


@dataclass
class InputSlotInfo:
    """One value a run needs (an ``<INPUT B=0>`` or ``<INPUT B=3>``), in instruction order."""
    position: int                 # index into the Session's feeds
    tick: int
    variant: int                  # B
    name: Optional[str]
    kind: str                     # user input | buffer | lifted constant
    shape: Optional[tuple] = None     # from the file's input signature, when it has one
    dtype: Optional[str] = None
    low: Optional[float] = None
    high: Optional[float] = None
    has_stored: bool = False      # B=3 whose CNST holds the value itself
    spec: Any = None              # the input signature's InputSpec, when the file has one

    @property
    def label(self) -> str:
        return self.name or f"input @{self.tick}"


def input_slots(nac: NacFile) -> list[InputSlotInfo]:
    """Every value a run needs, named and typed from the file's input signature when present."""
    from nac_engine.format.model import is_tensor_placeholder
    names = nac.input_name_map
    slots: list[InputSlotInfo] = []
    for ins in nac.instructions:
        if ins.a != OP_INPUT or ins.b not in (0, 3):
            continue
        cid = ins.const_ids[0] if ins.b == 3 and ins.const_ids else None
        const = nac.constants.get(cid) if cid is not None else None
        stored = const is not None and not is_tensor_placeholder(const.value)
        name = names.get(ins.index)
        kind = "lifted constant" if ins.b == 3 else ("user input" if name else "buffer")
        slots.append(InputSlotInfo(len(slots), ins.index, ins.b, name, kind, has_stored=stored))
    for slot, spec in zip(slots, _signature_for(nac, slots)):
        if spec is None:
            continue
        slot.shape = tuple(int(x) for x in spec.shape) if getattr(spec, "shape", None) is not None else None
        slot.dtype = str(getattr(spec, "dtype", None) or "") or None
        slot.low, slot.high = getattr(spec, "low", None), getattr(spec, "high", None)
        slot.spec = spec
        kind = getattr(spec, "kind", None)
        if kind:
            slot.kind = {"input": "user input", "constant": "lifted constant"}.get(kind, str(kind))
        if not slot.name and getattr(spec, "name", None):
            slot.name = str(spec.name)
    return slots


def _signature_for(nac: NacFile, slots: list[InputSlotInfo]) -> list:
    """The recorded input signature matched to the slots (by name, else by order); a file
    without one (the reference compiler's) gives Nones, and the dialog asks."""
    try:
        from nac_engine.format.input_signature import read_input_signature
    except ImportError:      # the engine half of issue 10 is not in this tree yet
        return [None] * len(slots)
    try:
        specs = read_input_signature(nac)
    except Exception:        # a damaged signature must not stop a run: the dialog asks
        specs = None
    if not specs:
        return [None] * len(slots)
    by_name = {getattr(s, "name", None): s for s in specs}
    if all(s.name in by_name for s in slots if s.name):
        matched = [by_name.get(s.name) if s.name else None for s in slots]
        if any(m is not None for m in matched):
            return matched
    return list(specs)[:len(slots)] + [None] * max(0, len(slots) - len(specs))
