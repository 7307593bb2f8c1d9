"""Which instructions of a read OPS section might refer to something that does not exist, found
from the section's bytes with numpy.

``verify`` judges each instruction's references (``verify._instruction_problems``: op id 0, a
parameter or lifted constant that is not there, a constant id that CNST lacks). Judging every
instruction one by one cost ~3 us each, and remembering each distinct encoding's verdict does not
help a crafted section whose 100k encodings all differ. Here every instruction that *could* have
such a problem is flagged in bulk, a superset of those that have one (the same conditions, on
the encoded fields); verify then judges only the flagged ones, the same way as before, so its
problems and messages are unchanged.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..isa.optable import OP_INPUT
from .instruction_table import EncodedInstructions
from .model import NacFile

_CHUNK = 1 << 16       # instructions judged at once (bounds the constant-id arrays)


def suspect_instructions(nac: NacFile, encoded: EncodedInstructions, names: dict) -> np.ndarray:
    """Indices (ascending) of the instructions whose references need judging one by one."""
    code, starts, ends = encoded.code, encoded.starts, encoded.ends
    u8 = np.frombuffer(code, dtype=np.uint8)
    i16 = np.frombuffer(code, dtype="<i2", count=len(code) // 2)
    named = np.zeros(256, dtype=bool)
    named[[a for a in names if isinstance(a, int) and 0 <= a < 256]] = True
    constants = _Known(nac.constants)
    internal = nac.header.weights_internal
    params = _Known(nac.params, lambda p: not (internal and p.meta is None))
    out = []
    for c0 in range(0, len(starts), _CHUNK):
        s = starts[c0:c0 + _CHUNK]
        a, b = u8[s].astype(np.int64), u8[s + 1].astype(np.int64)
        c_fix, _d_len, counted = encoded.fields(a, b)
        s16 = s // 2                      # (instructions are whole i16 values from the section start)
        c_len = np.where(counted, i16[np.where(counted, s16 + 1, 0)].astype(np.int64) + 1, c_fix)
        # C must lie inside the instruction (so the reads below stay in it)
        c_len = np.minimum(c_len, (ends[c0:c0 + _CHUNK] - s - 2) // 2)
        flag = a == 0
        loads = (a == OP_INPUT) & (c_len > 1)
        if loads.any():
            ref = i16[np.where(loads, s16 + 2, 0)]
            flag |= loads & (b == 1) & ~params.has(ref)
            flag |= loads & (b == 3) & ~constants.has(ref)
        regular = np.flatnonzero((a >= 10) & (c_len > 1) & named[np.minimum(a, 255)])
        if regular.size:
            n_ids = c_len[regular] - 1
            owner = np.repeat(regular, n_ids)
            within = np.arange(len(owner), dtype=np.int64) - np.repeat(np.cumsum(n_ids) - n_ids, n_ids)
            ids = i16[s16[owner] + 2 + within]
            flag[owner[~constants.has(ids)]] = True
        out.append(np.flatnonzero(flag) + c0)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _id_set(ids) -> np.ndarray:
    """Which of the ids an i16 field can name are in ``ids`` (an id outside that range is never
    named): up to 4,096 ids sorted, more as a table by id + 2**15 filled a slice of ``ids`` at a
    time (a 65k-entry CNST's ids as one int64 array would be most of the section)."""
    it = iter(ids)
    chunk = list(itertools.islice(it, 4097))
    if len(chunk) <= 4096:
        return np.array(sorted(i for i in chunk if isinstance(i, int) and -32768 <= i <= 32767), dtype=np.int64)
    table = np.zeros(1 << 16, dtype=bool)
    while chunk:
        table[np.fromiter((i for i in chunk if isinstance(i, int) and -32768 <= i <= 32767),
                          dtype=np.int64) + 32768] = True
        chunk = list(itertools.islice(it, 8192))
    return table


class _Known:
    """Membership of i16 values in a dict's keys: a few values looked up in the dict, many in an
    id set made once (:func:`_id_set`)."""

    def __init__(self, ids: dict, keep=None):
        self.ids, self.keep = ids, keep or (lambda _value: True)
        self.set: np.ndarray | None = None

    def has(self, values: np.ndarray) -> np.ndarray:
        ids, keep = self.ids, self.keep
        if self.set is None and 8 * values.size < len(ids):
            return np.fromiter((v in ids and keep(ids[v]) for v in values.tolist()), dtype=bool, count=values.size)
        if self.set is None:
            self.set = _id_set(k for k, v in ids.items() if keep(v))
        ids = self.set
        if ids.dtype == bool:
            return ids[values.astype(np.int64) + 32768]
        if not ids.size:
            return np.zeros(values.shape, dtype=bool)
        return ids[np.minimum(np.searchsorted(ids, values), ids.size - 1)] == values
