"""MIND Core IR as data: tensor types, instructions (seed 001's ``CoreOperation``) and modules.

Every instruction remembers where it came from (line, column, byte offset and length, and the
byte range of each token), so the span tree, the Problems view and the NAC source map point at
the IR text. Operand *values* (``%3``) are kept apart from literal parameters (axes, shapes…):
``operands`` lists value ids, ``params`` holds the op's literal fields by name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Union

Dim = Union[int, str]            # an int, a symbol, or "?"

#: dtypes the parser accepts (seed 001 lists i32/i64/f32/f64; the reference compilers add these)
DTYPES = ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool")
FLOAT_DTYPES = frozenset({"f16", "bf16", "f32", "f64"})
INT_DTYPES = frozenset({"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"})

#: Core v1 opcodes (seed 001) and their literal parameters in positional order.
CORE_OPS = {
    "Input": (),
    "ConstI64": ("value",),
    "ConstF32": ("value",),
    "ConstF64": ("value",),
    "ConstTensor": ("data",),
    "BinOp": ("op",),
    "Sum": ("axes", "keepdims"),
    "Mean": ("axes", "keepdims"),
    "Reshape": ("new_shape",),
    "Transpose": ("permutation",),
    "ExpandDims": ("axes",),
    "Squeeze": ("axes",),
    "Index": ("indices",),
    "Slice": ("starts", "ends", "steps"),
    "Gather": (),
    "Dot": (),
    "MatMul": (),
    "Conv2d": ("strides", "padding"),
    "Relu": (),
    "Neg": (),
    "Exp": (),
    "Log": (),
}
#: number of value operands per opcode
ARITY = {"Input": 0, "ConstI64": 0, "ConstF32": 0, "ConstF64": 0, "ConstTensor": 0, "BinOp": 2, "Sum": 1,
         "Mean": 1, "Reshape": 1, "Transpose": 1, "ExpandDims": 1, "Squeeze": 1, "Index": 1, "Slice": 1,
         "Gather": 2, "Dot": 2, "MatMul": 2, "Conv2d": 2, "Relu": 1, "Neg": 1, "Exp": 1, "Log": 1}
BINOPS = ("Add", "Sub", "Mul", "Div")
COMMUTATIVE = frozenset({"Add", "Mul"})
CONST_OPS = frozenset({"ConstI64", "ConstF32", "ConstF64", "ConstTensor"})
#: ``%8 = %7``: a second name for a value (autodiff_output.ir); no instruction of its own
ALIAS = "Alias"


@dataclass(frozen=True)
class TensorType:
    dtype: str
    shape: tuple            # of Dim

    @property
    def static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def text(self) -> str:
        return f"Tensor<{self.dtype}, [{', '.join(str(d) for d in self.shape)}]>"


class Token(NamedTuple):
    kind: str               # value | int | float | string | ident | punct | comment
    text: str
    offset: int             # byte offset in the file
    length: int


@dataclass(slots=True)
class Instr:
    vid: int                        # the ValueId this instruction defines (``%vid``)
    opcode: str                     # Core name (``BinOp``…), ``Alias``, or the unknown name as written
    operands: list                  # value ids read, in order
    # literal fields by name (see CORE_OPS); read-only once parsed: the lines the parser makes from one
    # remembered line share its dict (canonicalize copies before it changes anything)
    params: dict = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)      # ``{name: "x"}`` and any other braces content
    type: Optional[TensorType] = None              # the declared result type (None: not written)
    line: int = 0
    column: int = 0
    offset: int = 0
    length: int = 0
    name: str = ""                  # ``%vid`` as written (``%x`` allowed by the EBNF)
    arg_error: Optional[str] = None                    # literals that do not fit the op (verifier reports it)
    dialect_op: str = ""            # the opcode as spelled in the file (``add``, ``+``, ``BinOp``)
    # ``tokens`` / ``operand_cols`` (properties below); an instruction the parser made from a remembered
    # line leaves them None and holds ``_source`` (the file's bytes and the parser's function that reads
    # the two from this instruction's line, one tuple for the whole file): read when first used, so a big
    # file holds no Token per token (<= 20 B of RAM per file byte). The function comes with the data, not
    # by import: the parser imports this module.
    _tokens: Optional[list] = field(default=None, repr=False, compare=False)
    _cols: Optional[list] = field(default=None, repr=False, compare=False)
    _source: Optional[tuple] = field(default=None, repr=False, compare=False)

    @property
    def tokens(self) -> list:
        """(role, Token) pairs for the span tree."""
        if self._tokens is None:
            self._fill_positions()
        return self._tokens

    @tokens.setter
    def tokens(self, value: list) -> None:
        self._tokens = value

    @property
    def operand_cols(self) -> list:
        """(line, column, offset) of each operand."""
        if self._cols is None:
            self._fill_positions()
        return self._cols

    @operand_cols.setter
    def operand_cols(self, value: list) -> None:
        self._cols = value

    def _fill_positions(self) -> None:
        if self._source is None:
            self._tokens = [] if self._tokens is None else self._tokens
            self._cols = [] if self._cols is None else self._cols
            return
        data, reparse = self._source
        tokens, cols = reparse(data, self)
        if self._tokens is None:
            self._tokens = tokens
        if self._cols is None:
            self._cols = cols
        self._source = None

    @property
    def binop(self) -> Optional[str]:
        return self.params.get("op") if self.opcode == "BinOp" else None

    def label(self) -> str:
        return f"{self.opcode}({self.binop})" if self.opcode == "BinOp" else self.opcode


@dataclass
class Module:
    instrs: list                    # Instr, in file order
    outputs: list                   # value ids
    dialect: str = "spec"           # spec | python | module | mic@2
    outputs_line: int = 0
    outputs_column: int = 0
    outputs_offset: int = 0
    output_cols: list = field(default_factory=list)    # (line, column, offset) of each output

    def defs(self) -> dict:
        """value id -> the first instruction defining it."""
        out: dict = {}
        for ins in self.instrs:
            out.setdefault(ins.vid, ins)
        return out

    def inputs(self) -> list:
        return [i for i in self.instrs if i.opcode == "Input"]


def literal_text(value: Any) -> str:
    """A parameter value the way the reference encoding prints it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        r = repr(value)
        return r if ("." in r or "e" in r or "n" in r) else r + ".0"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal_text(v) for v in value) + "]"
    if isinstance(value, str):
        return value
    return str(value)
