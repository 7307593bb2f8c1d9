"""A Hugging Face tokenizer's files embedded in RSRC, and a usable tokenizer rebuilt from them.

API
---
``embed_tokenizer(nac, tokenizer_dir) -> list[str]`` copies the tokenizer files found in a local
directory into ``nac.rsrc`` (replacing resources of the same names, keeping any others) and
returns their names. It refuses a directory whose files our loader cannot turn into a
tokenizer, so a compiled file never carries a tokenizer the Studio cannot use.
``load_tokenizer(nac) -> tokenizers.Tokenizer | None`` rebuilds the tokenizer from the embedded
files (``None`` when there are none it can use): ``tok.encode(text).ids`` and ``tok.decode(ids)``.

Names: resources are named after the files (``tokenizer.json``, ``vocab.txt``, ...). That is
the reference compiler's convention for raw tokenizer files (research §13.2,
``compile_tokenizer_resources=False``). Its default instead packs TISA tables (``vocab.b``,
``vidx.b``, ``merges.b``) for its PROC manifest; those are not produced here.

What is rebuilt, in order of preference:
1. ``tokenizer.json`` (the ``tokenizers`` library's own serialisation), complete.
2. ``vocab.txt``: BERT WordPiece with the normaliser/pre-tokeniser/[CLS]…[SEP] template that
   ``BertTokenizer`` uses, taking ``do_lower_case``/``strip_accents``/``tokenize_chinese_chars``
   and the special tokens from ``tokenizer_config.json``/``special_tokens_map.json``.
3. ``vocab.json`` + ``merges.txt``: GPT-2 style byte-level BPE (``add_prefix_space`` from
   ``tokenizer_config.json``).
SentencePiece models (``spiece.model`` …) are embedded but not rebuilt: that needs
transformers' converters and the sentencepiece package.

Like ``AutoTokenizer`` called on a text, the result neither pads nor truncates (a
``tokenizer.json`` may carry fixed padding, which would otherwise pad every text); call
``enable_truncation``/``enable_padding`` for that.

Untrusted input: every file, on disk or in a ``.nac``, is size-checked before it is read or
decoded (``MAX_FILE_BYTES``); bad bytes in a file's RSRC raise ``NacFormatError`` naming the
resource and its offset.
"""
from __future__ import annotations

import os
import stat
from typing import Optional

from ..errors import NacFormatError
from ..format import bounded_json
from ..format.model import NacFile, Resource

# The files a Hugging Face tokenizer directory may hold (transformers' VOCAB_FILES_NAMES
# across tokenizer classes, plus the shared configuration files).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.txt", "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")
MAX_FILE_BYTES = 64 << 20          # far above real tokenizers (a 250k-token tokenizer.json is ~17 MB)
MAX_VOCAB_LINES = 4_000_000
#: The longest text tokenised for the user (characters): a prompt, not a corpus. With it, the
#: regex engine's own retry limit bounds the time a hostile pre-tokenizer pattern can take.
MAX_TEXT_CHARS = 100_000


class _Files:
    """Name → bytes of the embedded files, with where each came from for error messages."""

    def __init__(self, nac: NacFile):
        self._by_name = {r.name: r for r in (nac.rsrc or []) if r.name in TOKENIZER_FILES}

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def _fail(self, name: str, reason: str):
        r = self._by_name[name]
        return NacFormatError(f"RSRC/{name}", max(r.data_offset, 0), reason)

    def raw(self, name: str) -> bytes:
        r = self._by_name[name]
        size = r.data_length if r._payload is None else len(r._payload)
        if size > MAX_FILE_BYTES:
            raise self._fail(name, f"{size} bytes; a tokenizer file may hold at most {MAX_FILE_BYTES}")
        return r.data

    def text(self, name: str) -> str:
        try:
            return self.raw(name).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self._fail(name, f"not UTF-8 text ({e.reason} at byte {e.start})") from None

    def json(self, name: str) -> dict:
        if name not in self:
            return {}
        try:
            value = bounded_json.loads(self.text(name), what="the file")
        except ValueError as e:
            raise self._fail(name, str(e)) from None
        if not isinstance(value, dict):
            raise self._fail(name, f"expected a JSON object, found {type(value).__name__}")
        return value

    def lines(self, name: str) -> list[str]:
        # Split on newlines only, as transformers reads these files (str.splitlines would also
        # split on characters such as U+2028 that can be part of a token).
        lines = self.text(name).replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) > MAX_VOCAB_LINES:
            raise self._fail(name, f"{len(lines)} lines; at most {MAX_VOCAB_LINES} are accepted")
        return lines


# --------------------------------------------------------------------------- embedding
def _read_limited(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise ValueError(f"{path} is {st.st_size} bytes; a tokenizer file may hold at most {MAX_FILE_BYTES}")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:      # grew while we read it
        raise ValueError(f"{path} grew past {MAX_FILE_BYTES} bytes while being read")
    return data


def embed_tokenizer(nac: NacFile, tokenizer_dir) -> list[str]:
    """Embed the tokenizer files of ``tokenizer_dir`` in ``nac``'s RSRC (module docstring)."""
    tokenizer_dir = os.fspath(tokenizer_dir)
    if not os.path.isdir(tokenizer_dir):
        raise NotADirectoryError(f"{tokenizer_dir} is not a directory")
    found = {}
    for name in TOKENIZER_FILES:
        path = os.path.join(tokenizer_dir, name)
        if os.path.exists(path):
            found[name] = _read_limited(path)
    if not found:
        raise FileNotFoundError(f"no tokenizer files in {tokenizer_dir} (looked for: {', '.join(TOKENIZER_FILES)})")
    # Check before touching the file: what we embed must load.
    probe = NacFile(rsrc=[Resource(n, _payload=d) for n, d in found.items()])
    try:
        ok = load_tokenizer(probe) is not None
    except NacFormatError as e:
        raise ValueError(f"{tokenizer_dir}: {e.section.split('/', 1)[-1]}: {e.reason}") from None
    if not ok:
        raise ValueError(f"{tokenizer_dir}: found {', '.join(found)}, but none of tokenizer.json, vocab.txt or "
                         "vocab.json+merges.txt, which a tokenizer can be rebuilt from")
    kept = [r for r in (nac.rsrc or []) if r.name not in found]
    nac.rsrc = kept + [Resource(n, _payload=d) for n, d in found.items()]
    return list(found)


# --------------------------------------------------------------------------- loading
def _token(value) -> Optional[str]:
    """A special token as tokenizer_config/special_tokens_map write it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _special(files: _Files, key: str, default: Optional[str]) -> Optional[str]:
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        tok = _token(files.json(name).get(key))
        if tok is not None:
            return tok
    return default


def _vocab_ids(files: _Files, name: str, vocab: dict) -> None:
    bad = [k for k, v in vocab.items() if not isinstance(k, str) or not isinstance(v, int) or v < 0]
    if bad:
        raise files._fail(name, f"entry {bad[0]!r} does not map a token to a non-negative id")


def _wordpiece(files: _Files):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    vocab: dict[str, int] = {}
    for i, token in enumerate(files.lines("vocab.txt")):
        vocab[token] = i          # the line number is the id; a repeated token keeps its last line
    cfg = files.json("tokenizer_config.json")
    unk = _special(files, "unk_token", "[UNK]")
    cls, sep = _special(files, "cls_token", "[CLS]"), _special(files, "sep_token", "[SEP]")
    for name, tok in (("unk_token", unk), ("cls_token", cls), ("sep_token", sep)):
        if tok not in vocab:
            raise files._fail("vocab.txt", f"{name} {tok!r} is not in the vocabulary")
    tok = Tokenizer(models.WordPiece(vocab, unk_token=unk))
    lower = bool(cfg.get("do_lower_case", True))
    strip = cfg.get("strip_accents")
    tok.normalizer = normalizers.BertNormalizer(clean_text=True,
                                                handle_chinese_chars=bool(cfg.get("tokenize_chinese_chars", True)),
                                                strip_accents=None if strip is None else bool(strip),
                                                lowercase=lower)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])])
    tok.decoder = decoders.WordPiece(prefix="##")
    specials = [unk, cls, sep, _special(files, "pad_token", None), _special(files, "mask_token", None)]
    _add_tokens(files, tok, vocab, specials)
    return tok


def _add_tokens(files: _Files, tok, vocab: dict, specials: list) -> None:
    """Special tokens are matched whole in the text (never split), as transformers does; the
    entries of added_tokens.json must land on the ids the file gives them."""
    tok.add_special_tokens(list(dict.fromkeys(t for t in specials if t is not None and t in vocab)))
    added = files.json("added_tokens.json")
    _vocab_ids(files, "added_tokens.json", added)
    for token, want in sorted(added.items(), key=lambda kv: kv[1]):
        if token not in vocab:
            tok.add_tokens([token])
        if tok.token_to_id(token) != want:
            raise files._fail("added_tokens.json", f"{token!r} would get id {tok.token_to_id(token)}, "
                                                   f"not the {want} the file gives it")


def _byte_level_bpe(files: _Files):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    vocab = files.json("vocab.json")
    _vocab_ids(files, "vocab.json", vocab)
    merges = []
    for n, line in enumerate(files.lines("merges.txt")):
        if not line or (n == 0 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise files._fail("merges.txt", f"line {n + 1} is not two tokens separated by one space: {line[:60]!r}")
        merges.append((parts[0], parts[1]))
    cfg = files.json("tokenizer_config.json")
    prefix_space = bool(cfg.get("add_prefix_space", False))
    try:
        tok = Tokenizer(models.BPE(vocab, merges))    # byte-level: every byte is in the vocabulary
    except Exception as e:   # the library rejects merges naming tokens that are not in the vocabulary
        raise files._fail("merges.txt", f"does not fit vocab.json: {e}") from None
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    gpt2_default = "<|endoftext|>"     # GPT2Tokenizer's unk/bos/eos when the config names none
    _add_tokens(files, tok, vocab, [_special(files, k, gpt2_default) for k in ("unk_token", "bos_token", "eos_token")]
                + [_special(files, "pad_token", None)])
    return tok


def load_tokenizer(nac: NacFile):
    """Rebuild the embedded tokenizer (module docstring); ``None`` when there is none."""
    files = _Files(nac)
    if "tokenizer.json" in files:
        from tokenizers import Tokenizer
        text = files.text("tokenizer.json")
        depth = bounded_json.nesting_depth(text)
        if depth > bounded_json.MAX_DEPTH:
            raise files._fail("tokenizer.json", f"nests {depth} levels deep; at most {bounded_json.MAX_DEPTH} "
                                                "are accepted")
        try:
            tok = Tokenizer.from_str(text)
        except Exception as e:    # the library raises plain Exception for any malformed document
            raise files._fail("tokenizer.json", f"not a tokenizers document: {str(e)[:200]}") from None
    elif "vocab.txt" in files:
        tok = _wordpiece(files)
    elif "vocab.json" in files and "merges.txt" in files:
        tok = _byte_level_bpe(files)
    else:
        return None
    tok.no_padding()
    tok.no_truncation()
    return tok


__all__ = ["embed_tokenizer", "load_tokenizer", "TOKENIZER_FILES", "MAX_FILE_BYTES"]


def encode_text(tokenizer, text: str) -> list[int]:
    """The token ids of ``text`` under the file's tokenizer. A text the tokenizer cannot handle
    raises :class:`NacFormatError`: the Rust library *panics* on some inputs (a pre-tokenizer
    regex that hits the regex engine's retry limit), and its ``PanicException`` derives from
    ``BaseException``, past every ``except Exception``; it is caught here, at the boundary."""
    if len(text) > MAX_TEXT_CHARS:
        raise NacFormatError("tokenizer", 0, f"the text has {len(text):,} characters; at most "
                                             f"{MAX_TEXT_CHARS:,} are tokenised")
    try:
        return list(tokenizer.encode(text).ids)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:      # noqa: B036 (pyo3's PanicException is a BaseException)
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise NacFormatError("tokenizer", 0, f"the file's tokenizer failed on this text ({reason}); "
                                             "its pre-tokenizer pattern cannot handle it") from None
