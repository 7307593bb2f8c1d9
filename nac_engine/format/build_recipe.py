"""How ``nac compile`` built the model it compiled: the seed it set before calling the user's
factory (random initialisation draws from it). ``nac diff --eager`` and the Studio's Diff pane
build the eager side the same way, so a correctly compiled model compares equal to its source
instead of to a differently initialised copy. A small JSON resource beside the input signature;
files without it (older ones, other tools') were compiled with the default seed, 0."""
from __future__ import annotations

import json

from ..errors import NacFormatError
from .input_signature import resource_json

RESOURCE_NAME = "nac-studio/build"
VERSION = 1
MAX_PAYLOAD_BYTES = 4096
#: what ``nac compile --seed`` defaults to, hence what a file without the resource was built with
DEFAULT_SEED = 0


def set_build_recipe(nac, *, seed: int) -> None:
    """Record ``seed`` in ``nac.rsrc`` (replacing an earlier record, keeping other resources)."""
    from .model import Resource
    payload = json.dumps({"version": VERSION, "seed": int(seed)}, sort_keys=True).encode()
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
