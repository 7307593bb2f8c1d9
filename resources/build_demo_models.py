"""Build the bundled demo models in resources/models/ with the codec alone.

A 3-layer MLP (8 → 16 → 16 → 4, ReLU) with deterministic weights and an MMAP schedule
(preload one tick ahead, forward single-use results, free after last use). Until the
compiler lands this is what `nac` and the Studio open by default. Re-run to reproduce:

    python resources/build_demo_models.py
"""
from __future__ import annotations

import pathlib

import numpy as np

from nac_engine.format import write
from nac_engine.format.model import (Header, InputName, Instruction, MmapCommand, MmapRecord, NacFile, Parameter,
                                     TensorMeta)

HERE = pathlib.Path(__file__).resolve().parent / "models"


def demo_mlp() -> NacFile:
    rng = np.random.default_rng(0)
    sizes = [8, 16, 16, 4]
    nac = NacFile(Header(version="1.6", num_inputs=1, num_outputs=1, d_model=16))
    nac.cmap = {20: "aten.linear.default", 21: "aten.relu.default"}
    nac.perms = {1: "T", 2: "TTT"}
    ins = [Instruction(0, 2, 0, None, None)]
    nac.input_names = [InputName(0, "x")]
    pid = 0
    prev = 0
    for layer, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        for kind, shape in (("weight", (n_out, n_in)), ("bias", (n_out,))):
            pid += 1
            bound = 1 / np.sqrt(n_in)
            data = rng.uniform(-bound, bound, size=shape).astype("<f4")
            nac.params[pid] = Parameter(pid, f"fc{layer + 1}.{kind}", TensorMeta(0, shape, 0), _payload=data,
                                        data_length=data.nbytes, _file=nac)
            nac.tensor_order.append(pid)
            ins.append(Instruction(len(ins), 2, 1, (1, pid), None))
        i = len(ins)
        ins.append(Instruction(i, 20, 2, None, (prev - i, -2, -1)))
        prev = i
        if layer < 2:
            ins.append(Instruction(i + 1, 21, 1, None, (-1,)))
            prev = i + 1
    out = len(ins)
    ins.append(Instruction(out, 3, 0, (1, 0), (prev - out,)))
    nac.instructions = ins
    nac.mmap = _schedule(nac)
    return nac


def _schedule(nac: NacFile) -> list:
    """Preload params one tick before use, forward single-use values, free after last use."""
    users: dict[int, list[int]] = {}
    for ins in nac.instructions:
        for p in ins.producers():
            users.setdefault(p, []).append(ins.index)
    ticks: dict[int, list[MmapCommand]] = {}
    outputs = set(nac.output_producers())
    for ins in nac.instructions:
        if ins.a == 2 and ins.b == 1:
            ticks.setdefault(max(ins.index - 1, 0), []).append(MmapCommand(40, ins.index))
        us = users.get(ins.index, [])
        if not us or ins.index in outputs:
            continue
        if len(us) == 1 and us[0] == ins.index + 1 and ins.a != 2:
            ticks.setdefault(ins.index, []).append(MmapCommand(30, us[0]))
        else:
            if ins.a != 2 or ins.b != 1:
                ticks.setdefault(ins.index, []).append(MmapCommand(10, ins.index))
            ticks.setdefault(max(us) + 1, []).append(MmapCommand(20, ins.index))
    return [MmapRecord(t, sorted(c, key=lambda c: (c.action != 20, c.action, c.target)))
            for t, c in sorted(ticks.items()) if t < len(nac.instructions)]


def main() -> None:
    HERE.mkdir(exist_ok=True)
    path = HERE / "demo_mlp.nac"
    data = write(demo_mlp(), path)
    print(f"{path}: {len(data)} bytes")


if __name__ == "__main__":
    main()
