"""The one error type every decoder in the engine raises for bad input."""


class NacFormatError(ValueError):
    """A file (or part of one) that cannot be decoded as what it claims to be.

    ``section`` names the part of the file (``"header"``, ``"OPS"``, ``"DATA/block3"``...),
    ``offset`` is the absolute byte offset in the file where the problem was found, and
    ``reason`` says what is wrong in words a user can act on.
    """

    #: A reason longer than this is cut: a hostile file can put megabytes of text into one
    #: (a constant's value, a name), and every tool prints reasons on one line.
    MAX_REASON = 1000

    def __init__(self, section: str, offset: int, reason: str):
        self.section = section
        self.offset = int(offset)
        reason = str(reason)
        if len(reason) > self.MAX_REASON:
            reason = reason[:self.MAX_REASON] + f"… ({len(reason):,} characters)"
        self.reason = reason
        super().__init__(f"{section} @ {self.offset:#x} ({self.offset}): {reason}")

    def to_dict(self) -> dict:
        return {"section": self.section, "offset": self.offset, "reason": self.reason}

    @property
    def message(self) -> str:
        """What to tell a person: the reason alone where it is about the path itself (a directory,
        a FIFO: section ``file`` at offset 0, the path named in the reason), else where and why."""
        return self.reason if self.section == "file" and self.offset == 0 else str(self)


class NacEncodeError(ValueError):
    """A model that cannot be written: a value exceeds what its field can encode.

    The reference writer truncates the file in this case (research note §7); we refuse
    to write anything and name the field, the value and the limit instead.
    """


#: How many problems of one kind are listed before the rest are counted.
SHOWN_PER_KIND = 5
_NUMBER = __import__("re").compile(r"\d+")


def problem_kind(p: NacFormatError) -> tuple[str, str]:
    """(section, reason with its numbers as ``#``): problems of one kind differ only in where."""
    return p.section.split("/")[0], _NUMBER.sub("#", p.reason)


def summarised(problems):
    """``problems`` to print, the repetitive ones cut short: after :data:`SHOWN_PER_KIND` of one
    kind (same section, same reason but for its numbers) the rest are counted, and the last
    item of each long kind is a ``str``: "… and 267,790 more like this". A hostile file makes
    hundreds of thousands of identical warnings; a person reads the first few."""
    kinds: dict = {}
    out: list = []
    for p in problems:
        key = problem_kind(p)
        seen = kinds.get(key, 0)
        kinds[key] = seen + 1
        if seen < SHOWN_PER_KIND:
            out.append(p)
    for (section, reason), n in kinds.items():
        if n > SHOWN_PER_KIND:
            out.append(f"… and {n - SHOWN_PER_KIND:,} more like this ({section}: {reason})")
    return out


#: What a user may give where a .nac belongs, and what to run instead.
_NOT_NAC_HINTS = {
    ".py": "to compile a PyTorch model: nac compile {path} -o model.nac",
    **{ext: "nac reads compiled .nac files; compile the model first: nac compile MODEL.py -o model.nac, "
            "or nac compile --hf DIR -o model.nac for a Hugging Face directory"
       for ext in (".pt", ".pth", ".bin", ".ckpt", ".safetensors", ".onnx", ".gguf")},
}


def with_compile_hint(path: str, reason: str) -> str:
    """``reason``, and for a model file that is not NAC at all (``model.py``, ``.onnx``...) or a
    Hugging Face directory the command that makes a .nac of it (the command line's errors, the
    Studio's failed open and its empty graph)."""
    import os
    if os.path.isdir(path):
        if os.path.isfile(os.path.join(path, "config.json")):
            return f"{reason} (a Hugging Face model? nac compile --hf {path} -o model.nac)"
        return reason
    base, ext = os.path.splitext(str(path))
    hint = _NOT_NAC_HINTS.get(ext.lower())
    if ext.lower() == ".safetensors" and os.path.isfile(base + ".nac"):
        hint = f"this is the weights file of {os.path.basename(base)}.nac (its external weights): open {base}.nac"
    # only where the header says it is no NAC at all (too short for one, or other magic bytes)
    if hint and ("not a NAC file" in reason or "a NAC header needs" in reason):
        return f"{reason}; {hint.format(path=path)}"
    return reason
