"""Operation IDs and signature codes.

Standard tables per research note upstream_format.md §4.1: v1.6 has IDs 10-19, v1.7+
has 10-31. A file's CMAP overrides/extends the standard table (seed 000 §8.1).
"""
from __future__ import annotations

SYSTEM_OPS = {2: "<INPUT>", 3: "<OUTPUT>", 6: "<CONTROL_FLOW>", 7: "<CONVERGENCE>"}
OP_INPUT, OP_OUTPUT, OP_CONTROL_FLOW, OP_CONVERGENCE = 2, 3, 6, 7
FIRST_REGULAR_OP = 10

_V16_NAMES = ("pass", "add", "sub", "gt", "neg", "where", "clone", "view", "le", "arange")
_V18_EXTRA = ("mul", "div", "matmul", "transpose", "zeros", "zeros_like", "new_zeros",
              "ones", "ones_like", "new_ones", "full", "full_like")

STANDARD_OPS_V16 = {10 + i: f"nac.{n}" for i, n in enumerate(_V16_NAMES)}
STANDARD_OPS_V18 = {10 + i: f"nac.{n}" for i, n in enumerate(_V16_NAMES + _V18_EXTRA)}


def standard_ops(version: str) -> dict[int, str]:
    return STANDARD_OPS_V16 if version == "1.6" else STANDARD_OPS_V18


def custom_op_start(version: str) -> int:
    return max(standard_ops(version)) + 1


#: Library custom ops exported models carry, by the ATen op they compute like (the simulator costs
#: them, and the graph colours them, as that op).
CUSTOM_OP_KIN = {"transformers.grouped_mm_fallback.default": "aten._grouped_mm.default"}


def custom_op_name(name: str) -> bool:
    """``namespace.op[.overload]`` of an operator outside ATen and NAC's own (``mylib.scale.default``
    for ``mylib::scale``): one a library or the user's code registers with torch.library."""
    parts = name.split(".")
    return len(parts) in (2, 3) and all(p.isidentifier() for p in parts) and parts[0] not in ("aten", "nac", "prims")


def qualified_name(op: str) -> str:
    """torch's ``namespace::op`` of a file's op name (``mylib.scale.default`` → ``mylib::scale``)."""
    parts = op.split(".")
    return "::".join(parts[:2]) if len(parts) >= 2 else op


def uninitialised(op: str) -> bool:
    """Whether op ``op`` (``aten.empty_like.default``, ``aten::new_empty``...) returns whatever memory
    the allocator hands out: ``empty``, ``empty_like``, ``new_empty``, ``empty_strided``, the quantised
    ``_empty_*``. torch has no tag for this; the ATen naming convention says it (``empty`` as a word)."""
    name = op.split("::")[-1]
    parts = name.split(".")
    base = parts[1] if len(parts) > 1 and parts[0] in ("aten", "nac", "prims") else parts[0]
    return "empty" in base.strip("_").split("_")


# Signature codes (seed 000 §5.2.3)
TENSOR_CODES = frozenset("QKVMBWTP")
CONST_CODES = frozenset("SAfibsc")
SIGNATURE_CODES = TENSOR_CODES | CONST_CODES


def count_const_codes(signature: str) -> int:
    return sum(1 for ch in signature if ch in CONST_CODES)


# <INPUT> variants (B field); 4 and 5 are used only inside TRNG.
INPUT_VARIANTS = {0: "input", 1: "param", 2: "state", 3: "lifted", 4: "saved", 5: "target"}
# <OUTPUT> variants; 3 and 4 are used only inside TRNG.
OUTPUT_VARIANTS = {0: "return", 1: "subreturn", 3: "sgd_step", 4: "end_train"}
