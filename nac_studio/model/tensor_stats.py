"""A tensor's statistics and histogram, in chunks so that the work reports progress and can stop.

Runs in the engine host (``nac/statistics``): the Studio's process never holds a weight's values
to compute over them. numpy only."""
from __future__ import annotations

import math

import numpy as np

#: Values per step: a few ms of work, so a cancel is heard at once.
STATS_CHUNK = 1 << 20
HIST_BINS = 64


def tensor_stats(ctx, array_fn, bins: int = HIST_BINS) -> dict:
    """min/max/mean/std/sparsity/NaN/Inf and a histogram, over chunks so a task can report
    progress and stop. ``array_fn`` produces the (dequantised) array inside the task."""
    flat = np.asarray(array_fn()).reshape(-1)
    steps = max(1, (flat.size + STATS_CHUNK - 1) // STATS_CHUNK)
    return chunked_stats(ctx, lambda: (flat[k * STATS_CHUNK:(k + 1) * STATS_CHUNK] for k in range(steps)),
                         steps, flat.size, flat.dtype, bins)


def param_stats(ctx, p, bins: int = HIST_BINS) -> dict:
    """:func:`tensor_stats` of a parameter's values, read a block of rows at a time
    (``nac_engine.format.tensor_rows``): a multi-GB model's embedding is never held whole."""
    from nac_engine.format.tensor_rows import value_rows, value_shape
    shape = value_shape(p)
    n = math.prod(shape)
    rows = shape[0] if shape else 1
    per = max(1, STATS_CHUNK // max(1, n // max(1, rows)))       # rows per chunk
    steps = max(1, (rows + per - 1) // per)
    first = value_rows(p, 0, min(rows, per))
    if steps == 1:
        return chunked_stats(ctx, lambda: iter([first.reshape(-1)]), 1, n, first.dtype, bins)

    def chunks():
        for k in range(steps):
            yield (first if k == 0 else value_rows(p, k * per, (k + 1) * per)).reshape(-1)
    return chunked_stats(ctx, chunks, steps, n, first.dtype, bins)


def chunked_stats(ctx, chunks, steps: int, n: int, dtype, bins: int = HIST_BINS) -> dict:
    """The statistics over ``chunks()`` (an iterator of flat arrays, ``steps`` of them, ``n``
    values in all), which is walked twice: once for the moments, once for the histogram."""
    dtype = np.dtype(dtype)
    if n == 0:
        return {"count": 0}
    if dtype.kind not in "fiub":
        return {"count": n, "dtype": str(dtype)}
    lo, hi = np.inf, -np.inf
    total = total_sq = 0.0
    zeros = nans = infs = finite = 0
    wide = np.float64
    for k, part in enumerate(chunks()):
        if part.dtype.kind != "f":                 # integers and bools: exact sums in float64
            part = part.astype(np.float64)
        ok = np.isfinite(part)
        good = part
        if not ok.all():
            nans += int(np.isnan(part).sum())
            infs += int(np.isinf(part).sum())
            good = part[ok]
        if good.size:
            lo = min(lo, float(good.min()))
            hi = max(hi, float(good.max()))
            # sums in float64 over the values as stored (no widened copy); einsum's own loop, not
            # BLAS: OpenBLAS's ddot took ~80 ms on 2.4 M values here (its threads start up and
            # then spin, on the cores the UI thread needs)
            total += float(np.add.reduce(good, dtype=wide))
            total_sq += float(np.einsum("i,i->", good, good, dtype=wide))
            finite += good.size
        zeros += int(np.count_nonzero(part == 0))
        if ctx is not None:
            ctx.check()
            ctx.progress(k + 1, 2 * steps)
    out = {"count": n, "finite": finite, "nan": nans, "inf": infs, "zeros": zeros,
           "sparsity": zeros / n}
    if finite:
        mean = total / finite
        out.update(min=lo, max=hi, mean=mean, std=float(np.sqrt(max(0.0, total_sq / finite - mean * mean))))
        edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
        counts = np.zeros(bins, np.int64)
        for k, part in enumerate(chunks()):
            if part.dtype.kind != "f":
                part = part.astype(np.float64)
            if finite < n:
                part = part[np.isfinite(part)]
            # equal-width bins given as a count and range take numpy's arithmetic path (the
            # same counts as these edges, which the sorting path needed 30% longer for)
            counts += np.histogram(part, bins=bins, range=(edges[0], edges[-1]))[0]
            if ctx is not None:
                ctx.check()
                ctx.progress(steps + k + 1, 2 * steps)
        out["hist"] = (counts, edges)
    return out
