"""Plain-data summary of a file for ``nac info`` (and the Studio's overview)."""
from __future__ import annotations

from ..errors import NacFormatError
from ..isa.optable import OP_INPUT
from .lazy_records import walk_records
from .name_tables import parameter_items
from .model import NacFile


def summarize(nac: NacFile) -> dict:
    h = nac.header
    sections = [{"tag": s.name, "offset": s.offset, "size": s.length}
                for s in nac.spans.children if s.type == "section"] if nac.spans else []
    names = nac.input_name_map
    inputs = []
    for ins in nac.instructions:
        if ins.a != OP_INPUT or ins.b not in (0, 3):
            continue
        if ins.b == 0:
            inputs.append({"instruction": ins.index, "kind": "user" if ins.index in names else "unnamed",
                           "name": names.get(ins.index)})
        else:
            cid = ins.c[1] if ins.c and len(ins.c) > 1 else None
            const = nac.constants.get(cid)
            inputs.append({"instruction": ins.index, "kind": "lifted", "const_id": cid,
                           "name": None if const is None else str(const.value)})
    try:      # the shapes and dtypes the file was compiled for, when it records them
        from .input_signature import read_input_signature
        specs = {s.name: s for s in read_input_signature(nac) or () if s.kind == "input"}
    except NacFormatError:       # a broken signature is verify's to report
        specs = {}
    for entry in inputs:
        spec = specs.get(entry["name"]) if entry["kind"] == "user" else None
        if spec is not None:
            entry["shape"], entry["dtype"] = list(spec.shape), spec.dtype
    outputs = [{"instruction": p, "op": nac.instruction_name(nac.instructions[p])}
               for p in nac.output_producers() if 0 <= p < len(nac.instructions)]
    from .output_names import shown_output_names      # what forward returned them as
    for entry, name in zip(outputs, shown_output_names(nac, len(outputs))):
        if name:
            entry["name"] = name
    total_bytes = 0
    params = []
    for _pid, p in parameter_items(nac.params):
        entry = {"id": p.id, "name": p.name}
        if p.meta is not None:
            entry.update(dtype=p.meta.dtype_name, shape=list(p.meta.logical_shape), quant=p.quant_name,
                         bytes=p.data_length)
            total_bytes += p.data_length
        params.append(entry)
    ops: dict[str, int] = {}
    for ins in nac.instructions:
        name = nac.instruction_name(ins)
        ops[name] = ops.get(name, 0) + 1
    return {
        "path": nac.path,
        "version": h.version,
        "file_size": nac.size,
        "quantization": h.quant_name,
        "weights": "internal" if h.weights_internal else "external",
        "weights_path": nac.weights_path,
        "num_inputs": h.num_inputs,
        "num_outputs": h.num_outputs,
        "d_model": h.d_model,
        "trng_flag": h.trng_flag,
        "sections": sections,
        "counts": {"instructions": len(nac.instructions), "mmap_records": len(nac.mmap),
                   "mmap_commands": sum(len(r.commands) for r in walk_records(nac.mmap)), "cmap": len(nac.cmap),
                   "constants": len(nac.constants), "signatures": len(nac.perms), "parameters": len(nac.params),
                   "resources": len(nac.rsrc or []), "arrays": len(nac.arrs or []),
                   "trng_instructions": len(nac.trng or []),
                   "orch_bytecode_bytes": len(nac.orch.bytecode) if nac.orch else 0},
        "parameter_bytes": total_bytes,
        "inputs": inputs,
        "outputs": outputs,
        "parameters": params,
        "op_histogram": dict(sorted(ops.items(), key=lambda kv: -kv[1])),
        "problems": len(nac.problems),
    }


def format_summary(s: dict) -> str:
    out = [f"{s['path'] or '<bytes>'}: NAC v{s['version']}, {s['file_size']:,} bytes",
           f"  quantization {s['quantization']}, weights {s['weights']}"
           + (f" ({s['weights_path']})" if s["weights"] == "external" else ""),
           f"  inputs {s['num_inputs']}, outputs {s['num_outputs']}, d_model {s['d_model']}",
           "", "  section      offset        size"]
    for sec in s["sections"]:
        out.append(f"  {sec['tag']:<6} {sec['offset']:>12,} {sec['size']:>11,}")
    c = s["counts"]
    out += ["", "  " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in c.items() if v or k == "instructions")]
    out.append("")
    out.append("  inputs:")
    for i in s["inputs"]:
        label = i["name"] if i["kind"] == "user" else (f"lifted constant {i['name']}" if i["kind"] == "lifted"
                                                       else "unnamed (caller-supplied feed)")
        shape = f"  {i['dtype']}{i['shape']}" if "shape" in i else ""
        out.append(f"    v{i['instruction']:<5} {label}{shape}")
    out.append("  outputs:")
    for o in s["outputs"]:
        out.append(f"    v{o['instruction']:<5} " + (f"{o['name']}  ({o['op']})" if o.get("name") else o["op"]))
    out.append(f"  parameters: {len(s['parameters'])}, {s['parameter_bytes']:,} bytes stored")
    for p in s["parameters"][:12]:
        extra = f"  {p.get('dtype', '?')}{p.get('shape', '')}" + (f" {p['quant']}" if p.get("quant") not in (None, "none") else "")
        out.append(f"    #{p['id']:<4} {p['name']}{extra}")
    if len(s["parameters"]) > 12:
        out.append(f"    … {len(s['parameters']) - 12} more")
    out.append("  ops: " + ", ".join(f"{k}×{v}" for k, v in list(s["op_histogram"].items())[:12]))
    if s["problems"]:
        out.append(f"  problems: {s['problems']} (run `nac verify`)")
    return "\n".join(out)
