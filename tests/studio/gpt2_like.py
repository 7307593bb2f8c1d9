"""A GPT-2-shaped instruction stream, assembled from text (no weights), for graph tests and timings.

The corpus has no file larger than bert_tiny (112 instructions), and the compiler that
would produce a real GPT-2 ``.nac`` is not there yet. This builds the op sequence that
torch.export gives for Hugging Face's GPT2Model with eager attention — per block:
layer_norm, Conv1D as view/addmm/view, split into q/k/v, head reshapes, matmul, scale,
causal-mask slice + where, softmax, matmul, merge heads, projection, residual add,
layer_norm, MLP with the tanh GELU spelled out, projection, residual add — with the same
parameter names (``h.<i>.attn.c_attn.weight`` …). Twelve layers is GPT-2 small;
48 is GPT-2 XL. The graph structure (fan-in, residual edges, the mask buffer read by
every block) is what matters to layout, not the weights, so no tensors are attached.
"""
from __future__ import annotations

from nac_engine.format.model import NacFile
from nac_engine.text.asm import assemble


def gpt2_like_text(n_layer: int = 12, d: int = 768, n_head: int = 12, seq: int = 8) -> str:
    lines = [".version 1.8", ".ops"]
    params: list[str] = []
    v = 0

    def emit(body: str) -> int:
        nonlocal v
        lines.append(f"v{v} = {body}")
        v += 1
        return v - 1

    def param(name: str) -> int:
        params.append(name)
        return emit(f"param {name}")

    hd = d // n_head
    ids = emit("input input_ids")
    pos = emit("input position_ids")
    wte = param("wte.weight")
    tok = emit(f"aten.embedding.default(v{wte}, v{ids})")
    wpe = param("wpe.weight")
    pe = emit(f"aten.embedding.default(v{wpe}, v{pos})")
    x = emit(f"nac.add(v{tok}, v{pe})")
    for i in range(n_layer):
        p = f"h.{i}"
        w, b = param(f"{p}.ln_1.weight"), param(f"{p}.ln_1.bias")
        h = emit(f"aten.layer_norm.default(v{x}, [{d}], v{w}, v{b}, 1e-05)")
        w, b = param(f"{p}.attn.c_attn.weight"), param(f"{p}.attn.c_attn.bias")
        h2 = emit(f"nac.view(v{h}, [-1, {d}])")
        qkv = emit(f"aten.addmm.default(v{b}, v{h2}, v{w})")
        qkv = emit(f"nac.view(v{qkv}, [1, {seq}, {3 * d}])")
        sp = emit(f"aten.split.Tensor(v{qkv}, {d}, 2)")
        heads = []
        for k in range(3):
            g = emit(f"getitem(v{sp}, {k})")
            g = emit(f"nac.view(v{g}, [1, {seq}, {n_head}, {hd}])")
            heads.append(emit(f"aten.permute.default(v{g}, [0, 2, 1, 3])"))
        q, kk, vv = heads
        kt = emit(f"nac.transpose(v{kk}, -1, -2)")
        att = emit(f"nac.matmul(v{q}, v{kt})")
        att = emit(f"nac.div(v{att}, 8.0)")
        mask = param(f"{p}.attn.bias")
        m = emit(f"aten.slice.Tensor(v{mask}, 2, 0, {seq})")
        m = emit(f"aten.slice.Tensor(v{m}, 3, 0, {seq})")
        att = emit(f"aten.where.self(v{m}, v{att}, -3.4028234663852886e+38)<TTf>")
        att = emit(f"aten.softmax.int(v{att}, -1)")
        o = emit(f"nac.matmul(v{att}, v{vv})")
        o = emit(f"aten.permute.default(v{o}, [0, 2, 1, 3])")
        o = emit(f'nac.clone(v{o}, "contiguous_format")<Tc>')
        o = emit(f"nac.view(v{o}, [1, {seq}, {d}])")
        w, b = param(f"{p}.attn.c_proj.weight"), param(f"{p}.attn.c_proj.bias")
        o = emit(f"nac.view(v{o}, [-1, {d}])")
        o = emit(f"aten.addmm.default(v{b}, v{o}, v{w})")
        o = emit(f"nac.view(v{o}, [1, {seq}, {d}])")
        x = emit(f"nac.add(v{o}, v{x})")
        w, b = param(f"{p}.ln_2.weight"), param(f"{p}.ln_2.bias")
        h = emit(f"aten.layer_norm.default(v{x}, [{d}], v{w}, v{b}, 1e-05)")
        w, b = param(f"{p}.mlp.c_fc.weight"), param(f"{p}.mlp.c_fc.bias")
        h = emit(f"nac.view(v{h}, [-1, {d}])")
        h = emit(f"aten.addmm.default(v{b}, v{h}, v{w})")
        h = emit(f"nac.view(v{h}, [1, {seq}, {4 * d}])")
        half = emit(f"nac.mul(v{h}, 0.5)")
        cube = emit(f"aten.pow.Tensor_Scalar(v{h}, 3.0)")
        cube = emit(f"nac.mul(v{cube}, 0.044715)")
        inner = emit(f"nac.add(v{h}, v{cube})")
        inner = emit(f"nac.mul(v{inner}, 0.7978845608028654)")
        th = emit(f"aten.tanh.default(v{inner})")
        th = emit(f"nac.add(v{th}, 1.0)")
        h = emit(f"nac.mul(v{half}, v{th})")
        w, b = param(f"{p}.mlp.c_proj.weight"), param(f"{p}.mlp.c_proj.bias")
        h = emit(f"nac.view(v{h}, [-1, {4 * d}])")
        h = emit(f"aten.addmm.default(v{b}, v{h}, v{w})")
        h = emit(f"nac.view(v{h}, [1, {seq}, {d}])")
        x = emit(f"nac.add(v{h}, v{x})")
    w, b = param("ln_f.weight"), param("ln_f.bias")
    x = emit(f"aten.layer_norm.default(v{x}, [{d}], v{w}, v{b}, 1e-05)")
    emit(f"return v{x}")
    header = [f".param {k + 1} {name}" for k, name in enumerate(params)]
    return "\n".join(lines[:1] + header + lines[1:]) + "\n"


def gpt2_like(n_layer: int = 12, **kw) -> NacFile:
    return assemble(gpt2_like_text(n_layer, **kw))


if __name__ == "__main__":
    nac = gpt2_like(12)
    print(len(nac.instructions), "instructions,", len(nac.params), "params")
