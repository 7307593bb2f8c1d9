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


class NacEncodeError(ValueError):
    """A model that cannot be written: a value exceeds what its field can encode.

    The reference writer truncates the file in this case (research note §7); we refuse
    to write anything and name the field, the value and the limit instead.
    """
