"""Shared checks for compiled models: compile, encode, read back, verify, lint, run, compare with eager."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import numpy as np
import torch
import torch.utils._pytree as pytree

import nac_engine
from nac_engine.compiler import compile_model
from nac_engine.compiler.external import write_compiled
from nac_engine.format.verify import verify
from nac_engine.runtime.mmap_check import check_schedule

REL_TOL = 1e-4


@dataclass
class Checked:
    result: object         # CompileResult
    data: bytes
    nac: object            # NacFile read back from data
    outputs: list
    reference: list
    rel_errors: list


def eager_outputs(model, args, kwargs=None) -> list[np.ndarray]:
    with torch.no_grad():
        out = model(*args, **(kwargs or {}))
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    return [t.numpy() for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def named_inputs(nac, args, kwargs=None) -> dict:
    values = [v for v in pytree.tree_leaves((tuple(args), dict(kwargs or {}))) if isinstance(v, torch.Tensor)]
    assert len(values) == len(nac.input_names), (nac.input_names, len(values))
    return {n.name: v.numpy() for n, v in zip(nac.input_names, values)}


def rel_error(out: np.ndarray, ref: np.ndarray) -> float:
    assert out.shape == ref.shape, (out.shape, ref.shape)
    if ref.dtype == np.bool_ or np.issubdtype(ref.dtype, np.integer):
        return 0.0 if np.array_equal(out, ref) else 1.0
    scale = max(float(np.abs(ref).max()), 1e-12) if ref.size else 1.0
    return float(np.abs(out.astype(np.float64) - ref).max()) / scale if ref.size else 0.0


def outputs_read_but_not_saved(nac) -> list[int]:
    """Computed graph outputs that an instruction other than <OUTPUT> reads, without SAVE_RESULT
    (seed §4.5: a result with several consumers is saved). ``check_schedule`` skips outputs."""
    from nac_engine.format import layout as L
    from nac_engine.isa.optable import OP_INPUT, OP_OUTPUT
    saved = {c.target for r in nac.mmap for c in r.commands if c.action == L.MMAP_SAVE_RESULT and c.target == r.tick}
    readers: dict[int, set] = {}
    for ins in nac.instructions:
        if ins.a != OP_OUTPUT:
            for p in ins.producers():
                readers.setdefault(p, set()).add(ins.index)
    return [v for v in sorted(set(nac.output_producers()))
            if nac.instructions[v].a not in (OP_INPUT, OP_OUTPUT) and readers.get(v) and v not in saved]


def compile_and_check(model, args, kwargs=None, *, tol: float = REL_TOL, **options) -> Checked:
    """Compile, prove the file is clean (verify, lint) and that it computes what eager does."""
    model.eval()
    res = compile_model(model, args, kwargs, **options)
    ref = eager_outputs(model, args, kwargs)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.nac")
        write_compiled(res.nac, path)          # also writes model.safetensors for external weights
        with open(path, "rb") as fh:
            data = fh.read()
        nac = nac_engine.read(path)
        assert verify(nac) == []
        lint = check_schedule(nac)
        assert lint.has_schedule and lint.violations == [], lint.violations[:5]
        if options.get("mmap", "min-peak") == "min-peak" and options.get("optimize", True):
            assert outputs_read_but_not_saved(nac) == []
        out = nac_engine.run(nac, inputs=named_inputs(nac, args, kwargs))
    assert len(out) == len(ref) == nac.header.num_outputs
    errs = [rel_error(o, r) for o, r in zip(out, ref)]
    assert max(errs) <= tol, f"relative errors {errs} exceed {tol}"
    return Checked(res, data, nac, out, ref, errs)
