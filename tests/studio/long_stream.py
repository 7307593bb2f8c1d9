"""Long synthetic instruction streams with a planned MMAP schedule (timeline and simulator timings).

``long_stream(n)``: ``x`` then ``n - 2`` element-wise adds, each reading the previous value and
the one three back (so values are saved, forwarded and freed), and ``return``. With
``params_every=k`` every k-th instruction is a parameter (no tensor is attached: only for views
that take sizes from :func:`synthetic_sizes`, not for shape propagation).
"""
from __future__ import annotations

from nac_engine.compiler.schedule import plan_mmap
from nac_engine.format.model import NacFile
from nac_engine.text.asm import assemble


def long_stream_text(n: int, params_every: int = 0) -> str:
    lines = [".version 1.8"]
    body = ["v0 = input x"]
    params = []
    last_value = [0]
    for i in range(1, n - 1):
        if params_every and i % params_every == 0:
            params.append(f"w{i}")
            body.append(f"v{i} = param w{i}")
            continue
        a = last_value[-1]
        b = last_value[-3] if len(last_value) >= 3 else a
        if params and int(params[-1][1:]) > a:        # read the latest weight once
            b = int(params[-1][1:])
        body.append(f"v{i} = nac.add(v{a}, v{b})")
        last_value.append(i)
    body.append(f"v{n - 1} = return v{last_value[-1]}")
    header = [f".param {k + 1} {name}" for k, name in enumerate(params)]
    return "\n".join(lines + header + [".ops"] + body) + "\n"


def synthetic_sizes(nac: NacFile, nbytes: int = 256) -> dict[int, int]:
    return {i.index: (4 * nbytes if i.a == 2 and i.b == 1 else nbytes) for i in nac.instructions if i.a != 3}


def long_stream(n: int, params_every: int = 0, nbytes: int = 256) -> NacFile:
    nac = assemble(long_stream_text(n, params_every))
    nac.mmap = plan_mmap(nac, synthetic_sizes(nac, nbytes), mode="min-peak").records
    return nac
