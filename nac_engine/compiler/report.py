"""What a compile did, for ``nac compile --report`` and for callers of ``compile_model``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class CompileReport:
    model: str = ""
    options: dict = field(default_factory=dict)
    instructions_exported: int = 0          # before any pass
    instructions: int = 0                   # in the file
    passes: list = field(default_factory=list)         # PassStat per pass run
    params: int = 0
    param_bytes: int = 0                    # stored bytes of the tensors (after quantisation)
    float_param_bytes: int = 0              # the same tensors unquantised
    custom_ops: int = 0
    signatures: int = 0
    constants: int = 0
    op_histogram: dict = field(default_factory=dict)   # op name -> count in the file
    mmap: dict = field(default_factory=dict)           # mode -> {"peak": bytes, "tick": i, "commands": n}
    quant: list = field(default_factory=list)          # QuantReport per parameter
    tokenizer_files: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)        # stage -> seconds
    file_bytes: Optional[int] = None
    files: list = field(default_factory=list)

    def pass_totals(self) -> list[tuple[str, int, int]]:
        """(pass, rewrites, instructions removed) summed over rounds, in first-run order."""
        out: dict[str, list[int]] = {}
        for s in self.passes:
            t = out.setdefault(s.name, [0, 0])
            t[0] += s.rewrites
            t[1] += s.before - s.after
        return [(k, v[0], v[1]) for k, v in out.items()]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "options": self.options,
            "instructions_exported": self.instructions_exported, "instructions": self.instructions,
            "passes": [vars(s) for s in self.passes],
            "params": self.params, "param_bytes": self.param_bytes, "float_param_bytes": self.float_param_bytes,
            "custom_ops": self.custom_ops, "signatures": self.signatures, "constants": self.constants,
            "op_histogram": self.op_histogram, "mmap": self.mmap,
            "quant": [{"name": q.name, "stored_as": getattr(q, "stored_as", q.method), "shape": list(q.shape),
                       "max_abs_error": q.max_abs_error, "rel_error": q.rel_error,
                       "stored_bytes": q.stored_bytes, "float_bytes": q.float_bytes,
                       "skipped": getattr(q, "skipped", "")} for q in self.quant],
            "tokenizer_files": self.tokenizer_files, "warnings": self.warnings, "timings": self.timings,
            "file_bytes": self.file_bytes, "files": self.files,
        }


def _mib(n: int) -> str:
    if n < 10 * 1024:
        return f"{n:,} B"
    if n < 10 * 1024 * 1024:
        return f"{n / 1024:,.1f} KiB"
    return f"{n / 1024 / 1024:,.1f} MiB"


def format_report(r: CompileReport) -> str:
    o = r.options
    lines = [f"model      {r.model}",
             f"options    version {o.get('version')}, weights {o.get('weights')}, quantization "
             f"{o.get('quantization') or 'none'}, mmap {o.get('mmap')} (lookahead {o.get('preload_lookahead')}), "
             f"optimize {'on' if o.get('optimize') else 'off'}",
             f"instructions {r.instructions_exported} exported -> {r.instructions} in the file"]
    if r.passes:
        lines.append("passes     (round  pass              instructions before -> after, rewrites)")
        for s in r.passes:
            if s.rewrites or s.before != s.after:
                lines.append(f"  {s.round:>3}    {s.name:<17} {s.before:>6} -> {s.after:<6} {s.rewrites:>5}")
        totals = ", ".join(f"{n} -{d}" for n, _, d in r.pass_totals() if d)
        lines.append(f"  totals: {totals or 'no change'}")
    lines.append(f"tables     {r.custom_ops} CMAP ops, {r.signatures} signatures, {r.constants} constants, "
                 f"{r.params} parameters")
    size = f"weights {_mib(r.param_bytes)}"
    if r.float_param_bytes != r.param_bytes:
        size += f" (fp32/original {_mib(r.float_param_bytes)})"
    if r.file_bytes is not None:
        size += f", file {_mib(r.file_bytes)}"
    lines.append(f"sizes      {size}")
    for mode, m in r.mmap.items():
        chosen = " (written)" if mode == o.get("mmap") else ""
        lines.append(f"mmap       {mode:<10} peak live {_mib(m['peak'])} at tick {m['tick']}, "
                     f"{m['commands']} commands{chosen}")
    if r.quant:
        q = [x for x in r.quant if getattr(x, "stored_as", "none") != "none" or x.max_abs_error]
        if q:
            worst = max(q, key=lambda x: x.rel_error)
            mean_rel = sum(x.rel_error for x in q) / len(q)
            lines.append(f"quant      {len(q)} tensors quantised; max rel error {worst.rel_error:.3g} "
                         f"({worst.name}), mean rel error {mean_rel:.3g}")
            for x in sorted(q, key=lambda x: -x.rel_error)[:10]:
                lines.append(f"  {x.name:<48} {getattr(x, 'stored_as', x.method):<12} max|err| "
                             f"{x.max_abs_error:.3g}  rel {x.rel_error:.3g}")
        kept = [x for x in r.quant if getattr(x, "skipped", "")]
        if kept:
            lines.append(f"quant      {len(kept)} float tensor(s) not quantised:")
            for x in kept:
                lines.append(f"  {x.name:<48} {x.skipped}")
    if r.tokenizer_files:
        lines.append(f"tokenizer  {', '.join(r.tokenizer_files)}")
    if r.timings:
        lines.append("time       " + ", ".join(f"{k} {v:.2f}s" for k, v in r.timings.items()))
    for w in r.warnings:
        lines.append(f"warning    {w}")
    if r.files:
        lines.append("wrote      " + ", ".join(r.files))
    return "\n".join(lines)
