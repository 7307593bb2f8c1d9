"""How ``nac compile`` built the model it compiled: the seed it set before calling the user's
factory (random initialisation draws from it), and for ``--hf`` the options that chose the
model (class, random weights, batch, lengths, key/value-cache step). ``nac diff --eager`` and the
Studio's Diff pane build the eager side the same way, so a correctly compiled model compares
equal to its source instead of to a differently initialised copy. A small JSON resource beside
the input signature; files without it (older ones, other tools') were compiled with the default
seed, 0, and ``--hf``'s defaults."""
from __future__ import annotations

import json
from typing import Optional

from ..errors import NacFormatError
from .input_signature import resource_json

RESOURCE_NAME = "nac-studio/build"
VERSION = 1
MAX_PAYLOAD_BYTES = 4096
#: what ``nac compile --seed`` defaults to, hence what a file without the resource was built with
DEFAULT_SEED = 0


#: ``--hf`` options recorded, with their types (None: the option was not given)
HF_OPTIONS = {"class": str, "random_weights": bool, "batch": int, "seq_len": int, "image_size": int,
              "kv_cache": str, "cache_slots": int}


def set_build_recipe(nac, *, seed: int, hf: Optional[dict] = None) -> None:
    """Record ``seed`` (and ``hf``: the :data:`HF_OPTIONS` of a ``--hf`` compile) in ``nac.rsrc``
    (replacing an earlier record, keeping other resources)."""
    from .model import Resource
    recipe = {"version": VERSION, "seed": int(seed)}
    if hf is not None:
        recipe["hf"] = {k: v for k, v in hf.items() if k in HF_OPTIONS and v is not None}
    payload = json.dumps(recipe, sort_keys=True).encode()
    kept = [r for r in (nac.rsrc or []) if r.name != RESOURCE_NAME]
    nac.rsrc = kept + [Resource(RESOURCE_NAME, _payload=payload)]


def build_seed(nac) -> int:
    """The seed the file's model was built with (:data:`DEFAULT_SEED` when not recorded)."""
    value, off = resource_json(nac, RESOURCE_NAME, MAX_PAYLOAD_BYTES)
    if value is None:
        return DEFAULT_SEED
    seed = value.get("seed")
    if type(seed) is not int or not -(1 << 63) <= seed < (1 << 64):
        raise NacFormatError("RSRC", off, f"{RESOURCE_NAME}: 'seed' must be a 64-bit integer")
    return seed


def build_hf_options(nac) -> dict:
    """The ``--hf`` options the file's model was built with ({} when not recorded)."""
    value, off = resource_json(nac, RESOURCE_NAME, MAX_PAYLOAD_BYTES)
    hf = (value or {}).get("hf") or {}
    if not isinstance(hf, dict):
        raise NacFormatError("RSRC", off, f"{RESOURCE_NAME}: 'hf' must be an object")
    for k, v in hf.items():
        kind = HF_OPTIONS.get(k)
        if kind is None or type(v) is not kind or kind is int and not 0 < v < (1 << 31):
            raise NacFormatError("RSRC", off, f"{RESOURCE_NAME}: hf option {k!r} = {v!r} is not one nac compile records")
    return dict(hf)
