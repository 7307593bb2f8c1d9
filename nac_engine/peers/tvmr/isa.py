"""TVMR instruction set tables (seed 004; opcode numbers and operand patterns from the research note
§2.3 and the ternsig crate's ``action.rs`` / ``extensions/*.rs`` metadata, restated as data).

An instruction is 8 bytes: ExtID u16 BE, opcode u16 BE, operand bytes A B C D. ExtID 0 is the core
ISA; every other ExtID is an extension whose opcode table is below. ``PATTERNS`` says, per operand
pattern, what each of the four bytes is (``R`` register, ``I`` immediate byte, ``_`` padding).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Optional

#: operand pattern -> kinds of the four bytes (R register, I immediate, _ unused)
PATTERNS = {
    "None": "____", "Reg": "R___", "RegReg": "RR__", "RegRegReg": "RRR_", "RegRegRegFlags": "RRRI",
    "RegImm8": "RI__", "RegRegImm16": "RRII", "RegImm16": "RII_", "Imm8": "I___", "Imm16": "II__",
    "Imm32": "IIII", "RegCondRegReg": "RIRR",
}

#: operand names in Custom patterns that name a register (the rest are immediates)
_REG_NAMES = {"dst", "src", "reg", "target", "tgt", "source", "weights", "activity", "direction", "cold_reg",
              "table", "gate", "update", "state", "logits", "history", "aux"}


@dataclass(frozen=True)
class Op:
    ext_id: int
    opcode: int
    mnemonic: str          # upper case, as the tables spell it
    pattern: str           # a PATTERNS key or "Custom(...)"
    domain: bool = False   # yields a DomainOp to the host (not computed by the VM)

    @cached_property
    def kinds(self) -> str:
        """Four characters: R / I / _ for operand bytes A..D."""
        if self.pattern in PATTERNS:
            return PATTERNS[self.pattern]
        fields = re.findall(r"\[([A-Za-z0-9_]+):(\d)\]", self.pattern)
        out = ""
        for name, width in fields:
            k = "_" if name == "_" else ("R" if name in _REG_NAMES else "I")
            out += k * int(width)
        return (out + "____")[:4]


def _table(ext_id: int, rows: str, domain_all: bool = False, domain: tuple = ()) -> dict[int, Op]:
    t = {}
    for line in rows.strip().splitlines():
        code, name, pat = line.split(None, 2)
        t[int(code, 16)] = Op(ext_id, int(code, 16), name, pat.strip(), domain_all or name in domain)
    return t


# Core ISA (ExtID 0), action.rs. Patterns are this project's reading of each op's operand use
# (action.rs gives none); the assembler forms in asm.py fix the exact bytes.
CORE = _table(0, """
0000 NOP None
0001 HALT None
0002 CHECKPOINT None
0003 RESET None
0004 SYNC None
0005 YIELD None
1000 ALLOC_TENSOR Custom([reg:1][dim0:1][dim1_hi:1][dim1_lo:1])
1001 FREE_TENSOR Reg
1002 LOAD_WEIGHTS RegImm8
1003 STORE_WEIGHTS RegImm8
1004 COPY_REG RegReg
1005 SWAP_REG RegReg
1006 ZERO_REG Reg
1007 LOAD_INPUT Reg
1008 STORE_OUTPUT Custom([_:1][src:1][_:2])
1009 LOAD_TARGET Reg
2000 DEFINE_LAYER Custom([reg:1][in_dim:1][out_hi:1][out_lo:1])
2001 SET_ACTIVATION RegImm8
2002 SET_BIAS RegImm8
2003 WIRE_FORWARD RegRegReg
2004 WIRE_SKIP RegRegReg
2005 SET_DTYPE RegImm8
2006 FREEZE_LAYER Reg
2007 UNFREEZE_LAYER Reg
2008 GROW_NEURON RegImm8
2009 PRUNE_NEURON RegImm8
200A INIT_RANDOM Custom([reg:1][_:1][_:1][seed:1])
3000 MATMUL RegRegReg
3001 ADD RegRegReg
3002 MUL RegRegReg
3003 RELU RegReg
3004 SIGMOID Custom([dst:1][src:1][_:1][gain:1])
3005 TANH RegReg
3006 SOFTMAX RegReg
3007 GELU RegReg
3008 SCALE RegRegImm16
3009 SHIFT Custom([dst:1][src:1][amount:1][_:1])
300A CLAMP Custom([dst:1][src:1][min:1][max:1])
300B NEGATE RegReg
300C LAYER_NORM RegReg
300D BATCH_NORM RegReg
300E SUB RegRegReg
300F CMP_GT RegRegReg
3010 MAX_REDUCE RegReg
3011 SET_CONST RegRegImm16
4000 TERNARY_MATMUL RegRegReg
4001 QUANTIZE RegReg
4002 DEQUANTIZE RegRegImm16
4003 PACK_TERNARY RegReg
4004 UNPACK_TERNARY RegReg
4005 APPLY_POLARITY RegReg
4006 APPLY_MAGNITUDE RegReg
4007 THRESHOLD_POLARITY RegReg
4008 ACCUMULATE_PRESSURE RegReg
4009 TERNARY_ADD_BIAS RegRegReg
400A EMBED_LOOKUP RegRegReg
400B REDUCE_AVG Custom([dst:1][src:1][start:1][count:1])
400C SLICE Custom([dst:1][src:1][start:1][len:1])
400D ARGMAX RegReg
400E CONCAT RegRegReg
400F SQUEEZE Custom([dst:1][src:1][dim:1][_:1])
4010 UNSQUEEZE Custom([dst:1][src:1][dim:1][_:1])
4011 TRANSPOSE Custom([dst:1][src:1][dim1:1][dim2:1])
4012 GATE_UPDATE Custom([dst:1][gate:1][update:1][state:1])
4013 TERNARY_BATCH_MATMUL RegRegReg
4014 EMBED_SEQUENCE Custom([dst:1][table:1][count:1][_:1])
4015 REDUCE_MEAN_DIM Custom([dst:1][src:1][dim:1][_:1])
5000 MARK_ELIGIBILITY RegRegReg
5001 DECAY_ELIGIBILITY Reg
5002 COMPUTE_ERROR RegReg
5003 UPDATE_WEIGHTS Reg
5004 ADD_BABBLE RegImm8
5005 DECAY_BABBLE None
5006 COMPUTE_RPE RegReg
5007 GATE_ERROR RegImm8
5008 CHECKPOINT_WEIGHTS Reg
5009 ROLLBACK_WEIGHTS Reg
500A CONSOLIDATE None
500B ACTIVITY_WEIGHT RegReg
500C CHL_FREE_START None
500D CHL_FREE_RECORD RegReg
500E CHL_CLAMP_START None
500F CHL_CLAMP_RECORD RegReg
5010 CHL_UPDATE Reg
5011 CHL_BACKPROP_CLAMP RegReg
5012 MASTERY_UPDATE Custom([weights:1][activity:1][direction:1][scale:1])
5013 MASTERY_COMMIT Custom([weights:1][_:1][_:1][threshold:1])
6000 LOOP Custom([_:1][_:1][count_hi:1][count_lo:1])
6001 END_LOOP None
6002 BREAK None
6003 IF_ERROR_GT Custom([_:1][_:1][thr_hi:1][thr_lo:1])
6004 IF_ERROR_LT Custom([_:1][_:1][thr_hi:1][thr_lo:1])
6005 IF_LAYER_ACTIVE Reg
6006 CALL Custom([_:1][_:1][target_hi:1][target_lo:1])
6007 RETURN None
6008 JUMP Custom([_:1][_:1][target_hi:1][target_lo:1])
6009 IF_ZERO Custom([reg:1][_:1][target_hi:1][target_lo:1])
600A IF_NONZERO Custom([reg:1][_:1][target_hi:1][target_lo:1])
600B SKIP Imm8
7000 TRACE Reg
7001 BREAKPOINT None
7002 PROFILE_START None
7003 PROFILE_END None
7004 ASSERT Reg
7005 DUMP_REG Reg
""", domain=("LOAD_WEIGHTS", "STORE_WEIGHTS", "COMPUTE_ERROR", "CONSOLIDATE", "CHECKPOINT"))

TENSOR = _table(0x0001, """
0000 MATMUL RegRegReg
0001 ADD RegRegReg
0002 SUB RegRegReg
0003 MUL RegRegReg
0004 SCALE RegRegImm16
0005 SHIFT RegRegReg
0006 CLAMP RegRegRegFlags
0007 CMP_GT RegRegReg
0008 MAX_REDUCE RegReg
0009 NEGATE RegReg
000A REDUCE_AVG Custom([dst:1][src:1][start:1][count:1])
000B REDUCE_MEAN_DIM RegRegReg
000C SLICE Custom([dst:1][src:1][start:1][len:1])
000D ARGMAX RegReg
000E CONCAT RegRegReg
000F SQUEEZE RegReg
0010 UNSQUEEZE RegReg
0011 TRANSPOSE RegReg
""")

TERNARY = _table(0x0002, """
0000 TERNARY_MATMUL RegRegReg
0001 TERNARY_BATCH_MATMUL RegRegReg
0002 TERNARY_ADD_BIAS RegRegReg
0003 DEQUANTIZE RegRegImm16
0004 EMBED_LOOKUP RegRegReg
0005 EMBED_SEQUENCE Custom([dst:1][table:1][count:1][_:1])
0006 GATE_UPDATE Custom([dst:1][gate:1][update:1][state:1])
0007 QUANTIZE RegReg
0008 PACK_TERNARY RegReg
0009 UNPACK_TERNARY RegReg
000A APPLY_POLARITY RegReg
000B APPLY_MAGNITUDE RegReg
000C THRESHOLD_POLARITY RegReg
000D ACCUMULATE_PRESSURE RegReg
""")

ACTIVATION = _table(0x0003, """
0000 RELU RegReg
0001 SIGMOID RegReg
0002 TANH RegReg
0003 SOFTMAX RegReg
0004 GELU RegReg
""")

LEARNING = _table(0x0004, """
0000 MASTERY_UPDATE Custom([weights:1][activity:1][direction:1][flags:1])
0001 MASTERY_COMMIT Custom([weights:1][_:1][_:1][flags:1])
0002 ADD_BABBLE Reg
0003 LOAD_TARGET Reg
0004 MARK_ELIGIBILITY RegReg
0005 CHL_FREE_START None
0006 CHL_FREE_RECORD RegReg
0007 CHL_CLAMP_START None
0008 CHL_CLAMP_RECORD RegReg
0009 CHL_UPDATE Reg
000A CHL_BACKPROP_CLAMP RegReg
000B DECAY_ELIGIBILITY Reg
000C COMPUTE_ERROR RegReg
000D UPDATE_WEIGHTS Reg
000E DECAY_BABBLE None
000F COMPUTE_RPE RegReg
0010 GATE_ERROR RegImm8
0011 CHECKPOINT_WEIGHTS Reg
0012 ROLLBACK_WEIGHTS Reg
0013 CONSOLIDATE None
0014 DISCARD_CHECKPOINT Reg
""", domain=("CONSOLIDATE", "DISCARD_CHECKPOINT"))

NEURO = _table(0x0005, """
0000 CHEM_READ RegImm8
0001 CHEM_SET RegImm8
0002 CHEM_INJECT RegImm8
0003 FIELD_READ RegImm8
0004 FIELD_WRITE RegImm8
0005 FIELD_TICK Imm8
0006 STIM_READ Reg
0007 VALENCE_READ Reg
0008 CONV_READ Reg
0009 TEMP_READ RegReg
000A TEMP_WRITE RegReg
000B FIELD_DECAY Custom([field_id:1][retention:1][fatigue:1][_:1])
000C LATERAL_INHIBIT RegImm8
000D EXHAUSTION_BOOST RegImm8
000E NOVELTY_SCORE RegReg
000F FIELD_SLICE_READ Custom([target:1][field_id:1][slice:1][_:1])
0010 FIELD_SLICE_WRITE Custom([source:1][field_id:1][slice:1][_:1])
0011 COACT_RECORD RegReg
0012 COACT_READ RegReg
0013 COACT_RESET None
""", domain_all=True)

ARCH = _table(0x0006, """
0000 ALLOC_TENSOR Custom([reg:1][dim0:1][dim1_hi:1][dim1_lo:1])
0001 FREE_TENSOR Reg
0002 WIRE_FORWARD RegRegReg
0003 WIRE_SKIP RegRegReg
0004 GROW_NEURON Custom([cold_reg:1][_:1][count:1][seed:1])
0005 PRUNE_NEURON Custom([cold_reg:1][_:1][neuron_idx:1][_:1])
0006 INIT_RANDOM Custom([cold_reg:1][_:1][_:1][seed:1])
0007 DEFINE_LAYER Custom([layer:1][in_dim:1][out_hi:1][out_lo:1])
0008 FREEZE_LAYER Reg
0009 UNFREEZE_LAYER Reg
000A SET_ACTIVATION RegImm8
000B ALLOC_DYNAMIC Custom([target:1][bank:1][size_hi:1][size_lo:1])
000C FREE_DYNAMIC Reg
""", domain=("ALLOC_DYNAMIC", "FREE_DYNAMIC"))

ORCHESTRATION = _table(0x0007, """
0000 MODEL_LOAD RegImm8
0001 MODEL_EXEC RegImm8
0002 MODEL_INPUT RegImm8
0003 MODEL_OUTPUT RegImm8
0004 MODEL_UNLOAD Imm8
0005 MODEL_STATUS RegImm8
0006 MODEL_RELOAD Imm8
0007 MODEL_CHAIN Custom([slot1:1][slot2:1][_:2])
0008 ROUTE_INPUT RegImm8
0009 REGION_FIRE RegImm8
000A COLLECT_OUTPUTS Reg
000B REGION_STATUS RegImm8
000C REGION_ENABLE Imm8
000D REGION_DISABLE Imm8
""", domain_all=True)

LIFECYCLE = _table(0x0008, """
0000 PHASE_READ Reg
0001 TICK_READ Reg
0002 LEVEL_READ Reg
0003 INIT_THERMO Reg
0004 SAVE_THERMO Reg
0005 LOAD_THERMO Reg
0006 LOG_EVENT RegImm8
0007 HALT_REGION Imm8
0008 TXN_BEGIN Imm8
0009 TXN_COMMIT Imm8
000A TXN_ROLLBACK Imm8
000B LOAD_WEIGHTS RegImm8
000C STORE_WEIGHTS RegImm8
""", domain_all=True)

IPC = _table(0x0009, """
0000 SEND_SIGNAL RegImm8
0001 RECV_SIGNAL RegImm8
0002 BROADCAST RegImm8
0003 SUBSCRIBE RegImm8
0004 MAILBOX_PEEK RegImm8
0005 MAILBOX_POP RegImm8
0006 BARRIER_WAIT Imm8
0007 ATOMIC_CAS RegRegReg
""", domain_all=True)

TEST = _table(0x000A, """
0000 ASSERT_EQ RegReg
0001 ASSERT_GT RegReg
0002 ASSERT_ACTIVE Reg
0003 ASSERT_RANGE Custom([reg:1][min:1][max:1][_:1])
0004 TEST_BEGIN Imm8
0005 TEST_END None
0006 EXPECT_CHEM Custom([chemical:1][min:1][max:1][_:1])
0007 SNAPSHOT Reg
""")

BANK = _table(0x000B, """
0000 BANK_QUERY Custom([target:1][source:1][bank_slot:1][top_k:1])
0001 BANK_WRITE Custom([target:1][source:1][bank_slot:1][_:1])
0002 BANK_LOAD Custom([target:1][source:1][bank_slot:1][_:1])
0003 BANK_LINK Custom([source:1][edge_type:1][bank_slot:1][_:1])
0004 BANK_TRAVERSE Custom([target:1][source:1][bank_slot:1][packed:1])
0005 BANK_TOUCH Custom([source:1][bank_slot:1][_:2])
0006 BANK_DELETE Custom([source:1][bank_slot:1][_:2])
0007 BANK_COUNT Custom([target:1][bank_slot:1][_:2])
0008 BANK_PROMOTE Custom([source:1][bank_slot:1][_:2])
0009 BANK_DEMOTE Custom([source:1][bank_slot:1][_:2])
000A BANK_EVICT Custom([bank_slot:1][count:1][_:2])
000B BANK_COMPACT Custom([bank_slot:1][_:3])
""", domain_all=True)

POOL = _table(0x000C, """
0000 POOL_TICK Reg
0001 POOL_SAVE None
0002 POOL_LOAD None
0003 POOL_INJECT Custom([src:1][_:1][range_start:1][range_end:1])
0004 POOL_READ_OUTPUT Custom([tgt:1][_:1][range_start:1][range_end:1])
0005 POOL_READ_STATS Reg
0006 POOL_MODULATE Reg
0007 POOL_PRUNE_DEAD Reg
0008 POOL_SYNAPTOGENESIS Reg
0009 POOL_INJECT_DIRECT Custom([src:1][_:1][start_lo:1][end_lo:1])
000A POOL_READ_OUTPUT_DIRECT Custom([tgt:1][_:1][start_lo:1][end_lo:1])
""", domain_all=True)

SAMPLING = _table(0x00C0, """
0000 TEMPERATURE RegRegReg
0001 TOP_K RegRegReg
0002 TOP_P RegRegReg
0003 REP_PENALTY Custom([dst:1][logits:1][history:1][penalty:1])
""")

#: ExtID -> (standard name, opcode table)
EXTENSIONS: dict[int, tuple[str, dict[int, Op]]] = {
    0x0000: ("core", CORE), 0x0001: ("tensor", TENSOR), 0x0002: ("ternary", TERNARY),
    0x0003: ("activation", ACTIVATION), 0x0004: ("learning", LEARNING), 0x0005: ("neuro", NEURO),
    0x0006: ("arch", ARCH), 0x0007: ("orchestration", ORCHESTRATION), 0x0008: ("lifecycle", LIFECYCLE),
    0x0009: ("ipc", IPC), 0x000A: ("test", TEST), 0x000B: ("bank", BANK), 0x000C: ("pool", POOL),
    0x00C0: ("sampling", SAMPLING),
}
EXT_BY_NAME = {name: ext for ext, (name, _) in EXTENSIONS.items() if ext}
#: the extensions whose ops the VM computes itself (ternsig's compute_only_extensions)
COMPUTE_EXTENSIONS = (0x0001, 0x0002, 0x0003)


def lookup(ext_id: int, opcode: int) -> Optional[Op]:
    e = EXTENSIONS.get(ext_id)
    return e[1].get(opcode) if e else None


def ext_name(ext_id: int) -> str:
    e = EXTENSIONS.get(ext_id)
    if e:
        return e[0]
    if ext_id == 0xFFFF:
        return "reserved"
    return "user" if ext_id >= 0x0100 else "unknown"


# -- registers and types -----------------------------------------------------------------------------
BANKS = ("H", "C", "P", "S")
BANK_NAMES = ("hot", "cold", "param", "shape")
NULL_REG = 0xFF


def reg_name(b: int) -> str:
    return f"{BANKS[b >> 6]}{b & 0x3F}"


_REG_RE = re.compile(r"^([HCPST])(0[xX][0-9A-Fa-f]+|\d+)$")


def parse_reg(text: str) -> Optional[int]:
    m = _REG_RE.match(text.strip())
    if not m:
        return None
    bank = "H" if m.group(1) == "T" else m.group(1)
    idx = int(m.group(2), 0) if m.group(2).lower().startswith("0x") else int(m.group(2))
    if idx > 63:
        return None
    return (BANKS.index(bank) << 6) | idx


TYPES = {0x0000: "void", 0x0001: "bool", 0x0002: "u8", 0x0003: "i8", 0x0004: "u16", 0x0005: "i16",
         0x0006: "u32", 0x0007: "i32", 0x0008: "u64", 0x0009: "i64", 0x000A: "f16", 0x000B: "f32",
         0x000C: "f64", 0x0100: "signal", 0x0101: "packed_signal", 0x0102: "chemical"}
#: assembler dtype names -> type id (``ternary`` and ``packed`` are the assembler's spellings)
ASM_TYPES = {"ternary": 0x0100, "packed": 0x0101, "chemical": 0x0102, **{v: k for k, v in TYPES.items()
                                                                         if k < 0x0100}}
TYPE_TO_ASM = {v: k for k, v in ASM_TYPES.items()}

#: legacy TERN 1-byte dtypes (deserialize_legacy)
LEGACY_DTYPES = {0: "f32", 1: "i32", 2: "ternary", 3: "packed", 4: "f16", 5: "i16", 6: "i8", 7: "i64"}
