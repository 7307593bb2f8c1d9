"""Hugging Face models for the compiler: from a local directory (trained weights) or a ``config.json``
(random weights, seeded), plus example inputs of a chosen shape.

Offline only: nothing is downloaded (``local_files_only``). ``use_cache`` is switched off, so
decoder models export without key/value-cache outputs (a returned cache is no tensor NAC can
store), and the build says so in its notes.

Example inputs fit the model: token ids (plus ``decoder_input_ids`` for an encoder-decoder such
as T5, whose decoder needs them), pixels at the config's image size, Whisper's log-mel frames
(exactly what its encoder takes), or audio samples — by
default enough for ``seq_len`` frames after the feature extractor's conv stack, and an explicit
``seq_len`` too short for that stack is refused naming ``--seq-len`` and the minimum.
"""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from .deferred import Checkpoint
from .errors import CompileError

_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")


@dataclass
class HfModel:
    model: Any
    kwargs: dict = field(default_factory=dict)     # example inputs by forward-argument name
    source: str = ""
    trained: bool = False
    notes: list = field(default_factory=list)      # what the build changed about the model, for the user
    checkpoint: Any = None                         # deferred.Checkpoint: the weights are read from it when written


def _transformers():
    try:
        import transformers
    except ImportError:
        raise CompileError("transformers is not installed (pip install 'nac-studio[hf]')", stage="hf") from None
    return transformers


def config_path(path: str) -> str:
    """The ``config.json`` a path names: the file itself or the one in a directory."""
    p = os.fspath(path)
    if os.path.isdir(p):
        p = os.path.join(p, "config.json")
    if not os.path.isfile(p):
        raise CompileError(f"{path}: no config.json there", stage="hf")
    return p


def has_weights(path: str) -> bool:
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, f)) for f in _WEIGHT_FILES)


def load_model(path: str, *, model_class: str = "AutoModel", random_weights: bool = False,
               seed: int = 0, stream: bool = True) -> tuple[Any, bool]:
    """``(model, trained)``: trained weights when ``path`` is a directory holding them (and
    ``random_weights`` is off), else a model built from the config with seeded random weights.
    ``stream``: a directory with safetensors shards gives a model *without* its weights (every
    parameter a fake tensor, ``_without_weights``); the compile reads each weight from the
    shards when it writes it (``compiler/deferred.py``), so the model is never in memory."""
    tf = _transformers()
    cls = getattr(tf, model_class, None)
    # Auto classes build through from_config; concrete ones (BertModel) are PreTrainedModels
    # built from the config directly.
    concrete = inspect.isclass(cls) and issubclass(cls, tf.PreTrainedModel)
    if not (inspect.isclass(cls) and (hasattr(cls, "from_config") or concrete)):
        raise CompileError(f"{model_class!r} is not a transformers model class (AutoModel, "
                           f"AutoModelForCausalLM, BertModel, ...)", stage="hf")
    cfg_file = config_path(path)
    try:
        config = tf.AutoConfig.from_pretrained(os.path.dirname(cfg_file) if os.path.basename(cfg_file) ==
                                               "config.json" else cfg_file, local_files_only=True)
    except Exception as e:   # transformers raises several types for a bad config
        raise CompileError(f"{cfg_file}: not a usable transformers config: {e}", stage="hf") from None
    cache_was_on = bool(getattr(config, "use_cache", False))
    if hasattr(config, "use_cache"):
        config.use_cache = False
    trained = has_weights(path) and not random_weights
    if trained and stream and Checkpoint.present(path):
        model = _without_weights(cls, config, concrete)
        checkpoint = Checkpoint(path, getattr(model, "base_model_prefix", "") or "")
        missing = [n for n, _ in model.named_parameters() if checkpoint.key_for(n) is None]
        if not missing:
            model.eval()
            model._nac_checkpoint = checkpoint
            if cache_was_on:
                model._nac_notes = [CACHE_NOTE]
            return model, True
        # keys the checkpoint names differently (an older layout transformers renames on load):
        # load it the ordinary way, holding the model in memory
    bars = tf.utils.logging.is_progress_bar_enabled()
    tf.utils.logging.disable_progress_bar()      # a weight-loading bar per compile is noise in a CLI
    try:
        if trained:
            model = cls.from_pretrained(path, config=config, local_files_only=True)
        else:
            torch.manual_seed(seed)
            model = cls(config) if concrete else cls.from_config(config)
    except Exception as e:
        raise CompileError(f"{path}: cannot build {model_class}: {type(e).__name__}: {e}", stage="hf") from None
    finally:
        if bars:
            tf.utils.logging.enable_progress_bar()
    model.eval()
    model = model.float()               # float32 whatever the checkpoint stores: the reference numerics
    if cache_was_on:
        try:
            model._nac_notes = [CACHE_NOTE]
        except AttributeError:          # pragma: no cover - modules take attributes
            pass
    return model, trained


def _without_weights(cls, config, concrete: bool):
    """The model built from ``config`` with every parameter a float32 fake tensor (a shape and a
    dtype, no memory) and its buffers real: buffers a checkpoint does not hold (RoPE's
    ``inv_freq``) are computed by the model's own constructor, as ``from_pretrained`` does.
    Each parameter is allocated and initialised by its layer, then replaced at once, so the
    memory held is one parameter's at most."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    register = torch.nn.Module.register_parameter

    def fake_parameter(module, name, param):
        # an already fake one is a parameter being shared (tied embeddings): keep it the same object
        if param is not None and not isinstance(param, FakeTensor):
            dtype = torch.float32 if param.is_floating_point() else param.dtype
            with fake_mode:
                param = torch.nn.Parameter(torch.empty(param.shape, dtype=dtype), requires_grad=False)
        register(module, name, param)

    torch.nn.Module.register_parameter = fake_parameter
    try:
        with torch.no_grad():
            return cls(config) if concrete else cls.from_config(config)
    except Exception as e:
        raise CompileError(f"cannot build {cls.__name__} from the config: {type(e).__name__}: {e}",
                           stage="hf") from None
    finally:
        torch.nn.Module.register_parameter = register


CACHE_NOTE = ("use_cache turned off: the model would return its key/value cache, which is no tensor NAC "
              "can store; the compiled forward recomputes attention over the whole input")


def audio_min_samples(config: Any, frames: int = 1) -> Optional[int]:
    """Fewest samples the feature extractor's conv stack (``conv_kernel``/``conv_stride``,
    wav2vec2/HuBERT/WavLM style) turns into ``frames`` frames; None if the config has none."""
    kernels, strides = getattr(config, "conv_kernel", None), getattr(config, "conv_stride", None)
    if not kernels or not strides or len(kernels) != len(strides):
        return None
    n = max(1, frames)
    for k, st in reversed(list(zip(kernels, strides))):
        n = (n - 1) * int(st) + int(k)
    return n


def example_inputs(model: Any, *, batch: int = 1, seq_len: Optional[int] = None,
                   image_size: Optional[int] = None, seed: int = 0) -> dict:
    """Inputs for ``model``'s main input (token ids, pixels or audio), by argument name.
    ``seq_len``: tokens, or audio samples (None: 16 tokens / 16 frames' worth of samples)."""
    explicit = seq_len is not None
    seq_len = 16 if seq_len is None else seq_len
    config = model.config
    main = getattr(model, "main_input_name", "input_ids")
    gen = torch.Generator().manual_seed(seed)
    accepted = set(inspect.signature(model.forward).parameters)
    if main == "input_ids":
        # a text-and-image model (CLIP, SigLIP...) keeps its tokens' figures in text_config
        text = getattr(config, "text_config", None) or config
        limit = next((getattr(c, a) for c in (config, text) for a in ("max_position_embeddings", "n_positions", "n_ctx")
                      if isinstance(getattr(c, a, None), int)), None)
        if limit is not None and seq_len > limit:
            raise CompileError(f"--seq-len {seq_len} exceeds the model's {limit} positions", stage="hf")
        vocab = int(getattr(config, "vocab_size", 0) or getattr(text, "vocab_size", 0) or 0)
        if vocab <= 0:
            raise CompileError("the config has no vocab_size to draw token ids from", stage="hf")
        out = {"input_ids": torch.randint(0, vocab, (batch, seq_len), generator=gen)}
        if "attention_mask" in accepted:
            out["attention_mask"] = torch.ones(batch, seq_len, dtype=torch.long)
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in accepted:
            # T5-style: the decoder needs its own ids (the encoder alone: --hf-class T5EncoderModel)
            out["decoder_input_ids"] = torch.randint(0, vocab, (batch, seq_len), generator=gen)
        if "pixel_values" in accepted:      # ... and both towers run: an image beside the text
            out["pixel_values"] = _pixels(getattr(config, "vision_config", None) or config, image_size, batch, gen)
        return out
    if main == "pixel_values":
        return {"pixel_values": _pixels(config, image_size, batch, gen)}
    if main == "input_values" and isinstance(getattr(config, "num_mel_bins", None), int) \
            and isinstance(getattr(config, "max_length", None), int):
        # spectrogram transformers (AST): a fixed (frames, mel bins) patch grid, not raw samples
        return {"input_values": torch.randn(batch, config.max_length, config.num_mel_bins, generator=gen)}
    if main == "input_values":
        need = audio_min_samples(config)
        if explicit and need is not None and seq_len < need:
            raise CompileError(f"--seq-len {seq_len} samples is too short for the model's feature extractor "
                               f"(its conv stack needs at least {need} samples for one frame); use "
                               f"--seq-len {need} or more", stage="hf")
        if not explicit and need is not None:
            seq_len = audio_min_samples(config, seq_len)
        return {"input_values": torch.randn(batch, seq_len, generator=gen)}
    if main == "input_features":
        # log-mel frames (Whisper): the encoder takes exactly 2 x max_source_positions frames (its
        # convolution stride is 2), so --seq-len does not apply
        mels = int(getattr(config, "num_mel_bins", 80) or 80)
        frames = 2 * int(getattr(config, "max_source_positions", 1500) or 1500)
        out = {"input_features": torch.randn(batch, mels, frames, generator=gen)}
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in accepted:
            vocab = int(getattr(config, "vocab_size", 2) or 2)
            out["decoder_input_ids"] = torch.randint(0, vocab, (batch, min(seq_len, _target_positions(config))),
                                                     generator=gen)
        return out
    if main == "past_values" and isinstance(getattr(config, "context_length", None), int) \
            and isinstance(getattr(config, "num_input_channels", None), int):
        # a time series (PatchTST, PatchTSMixer): context_length steps of each channel
        return {"past_values": torch.randn(batch, config.context_length, config.num_input_channels, generator=gen)}
    raise CompileError(f"no example inputs for main input {main!r}; compile it from Python with "
                       f"nac_engine.compile(model, args)", stage="hf")


def _pixels(config: Any, image_size: Optional[int], batch: int, gen) -> Any:
    size = image_size or getattr(config, "image_size", None) or 224
    if isinstance(size, (list, tuple)):
        size = size[0]
    channels = int(getattr(config, "num_channels", 3) or 3)
    return torch.randn(batch, channels, int(size), int(size), generator=gen)


def _target_positions(config: Any) -> int:
    return int(getattr(config, "max_target_positions", 0) or 0) or 1 << 30


def build(path: str, *, model_class: str = "AutoModel", random_weights: bool = False, seed: int = 0,
          batch: int = 1, seq_len: Optional[int] = None, image_size: Optional[int] = None,
          stream: bool = True) -> HfModel:
    model, trained = load_model(path, model_class=model_class, random_weights=random_weights, seed=seed,
                                stream=stream)
    kwargs = example_inputs(model, batch=batch, seq_len=seq_len, image_size=image_size, seed=seed)
    return HfModel(model, kwargs, os.fspath(path), trained, list(getattr(model, "_nac_notes", ())),
                   getattr(model, "_nac_checkpoint", None))
