"""What a compiled model's outputs are called: the path of each in what ``forward`` returned
(``logits``, ``aux.0``, ``past_key_values.3.1``), in output order. ``nac compile`` records them
when ``forward`` returned a dict, a tuple or a model-output object (a single tensor needs no
name); ``nac run`` and ``nac info`` show them beside ``output N``. A small JSON resource beside
the input signature; a file without it (older ones, other tools') has unnamed outputs."""
from __future__ import annotations

import json
from typing import Optional

from ..errors import NacFormatError
from .input_signature import resource_json

RESOURCE_NAME = "nac-studio/output-names"
VERSION = 1
MAX_PAYLOAD_BYTES = 1 << 16
NAME_CHARS_MAX = 200


def set_output_names(nac, names: list[str]) -> None:
    """Record ``names`` (one per output) in ``nac.rsrc``, replacing an earlier record."""
    from .model import Resource
    payload = json.dumps({"version": VERSION, "names": [str(n)[:NAME_CHARS_MAX] for n in names]}).encode()
    if len(payload) > MAX_PAYLOAD_BYTES:
        return                      # thousands of outputs: left unnamed rather than a huge resource
    kept = [r for r in (nac.rsrc or []) if r.name != RESOURCE_NAME]
    nac.rsrc = kept + [Resource(RESOURCE_NAME, _payload=payload)]


def read_output_names(nac) -> Optional[list[str]]:
    """The recorded names, one per output, or None when the file records none."""
    value, off = resource_json(nac, RESOURCE_NAME, MAX_PAYLOAD_BYTES, (VERSION,))
    if value is None:
        return None
    names = value.get("names")
    if not isinstance(names, list) or not all(isinstance(n, str) and len(n) <= NAME_CHARS_MAX for n in names):
        raise NacFormatError("RSRC", off, f"{RESOURCE_NAME}: 'names' must be a list of strings of at most "
                                          f"{NAME_CHARS_MAX} characters")
    if len(names) != nac.header.num_outputs:
        raise NacFormatError("RSRC", off, f"{RESOURCE_NAME}: {len(names)} names for {nac.header.num_outputs} outputs")
    return names


def shown_output_names(nac, n: int) -> list[str]:
    """The names of the first ``n`` outputs, "" each where the file records none or a record that
    does not read (verify reports it): what the views and commands label outputs with."""
    try:
        names = read_output_names(nac)
    except NacFormatError:
        names = None
    return names[:n] if names is not None and len(names) >= n else [""] * n


def returned_names(nac, ins) -> list[str]:
    """The names of what the output instruction ``ins`` returns, one per value it reads: the run's
    return (B=0) carries the outputs' names, a subgraph's return none ("" each)."""
    n = len(ins.producers())
    return shown_output_names(nac, n) if ins.b == 0 else [""] * n


def output_label(i: int, name: str) -> str:
    """``output 0 (logits)``, or ``output 0`` for an unnamed one."""
    return f"output {i} ({name})" if name else f"output {i}"


def output_labels(nac, n: int) -> list[str]:
    """:func:`output_label` of each of the ``n`` outputs of ``nac``."""
    return [output_label(i, name) for i, name in enumerate(shown_output_names(nac, n))]


def pytree_output_names(out_spec) -> list[str]:
    """The names of the leaves of ``torch.export``'s output spec, joined by dots (``aux.0``);
    [] for a single tensor, which needs none."""
    from torch.utils import _pytree as pytree
    if out_spec is None or out_spec.num_leaves <= 1 and out_spec.is_leaf():
        return []
    tree = pytree.tree_unflatten(list(range(out_spec.num_leaves)), out_spec)
    names = []
    for path, _leaf in pytree.tree_flatten_with_path(tree)[0]:
        parts = []
        for key in path:
            for attr in ("key", "idx", "name"):        # MappingKey, SequenceKey, GetAttrKey
                if hasattr(key, attr):
                    parts.append(str(getattr(key, attr)))
                    break
            else:
                parts.append(str(key))
        names.append(".".join(parts))
    return names
