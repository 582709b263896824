"""Every translator the course builds, listed in one place: rebuild one from its config, or build one by name.

``MODEL_BUILDERS`` maps a model's ``config["kind"]`` to the function that builds it (each builder
records that config in the model, so a checkpoint can rebuild its model with ``build_model``).
``TRANSLATORS`` names the translators chapters 4–6 compare, each a builder of ``MODEL_BUILDERS``
with fixed options; ``build_translator`` sizes one for a data set's vocabularies.
"""

from __future__ import annotations

from typing import NamedTuple

from .bahdanau import make_bahdanau
from .checks import check_positive_int
from .luong import make_luong
from .seq2seq import EncoderDecoder, make_seq2seq
from .transformer import make_transformer

#: config["kind"] -> the builder of that model
MODEL_BUILDERS = {
    "seq2seq": make_seq2seq,
    "bahdanau": make_bahdanau,
    "luong": make_luong,
    "transformer": make_transformer,
}


class Translator(NamedTuple):
    """A translator of the comparison: the ``kind`` of model, which of the shared sizes (``embed_size``,
    ``num_hiddens``, ``num_layers``, ``half_width``, and ``ffn_num_hiddens``, four times ``num_hiddens``) it takes
    and the options it is built with."""

    kind: str
    sizes: tuple[str, ...]
    options: dict


#: name -> Translator, the models chapters 4–6 and 10 compare, as their papers define them. Bahdanau's translator
#: has one layer (a bidirectional encoder), as in the paper; only the local models have a window. "Luong uniform"
#: gives every source position the same weight: the ablation that keeps all of Luong's model but where it looks;
#: "Bahdanau uniform" is the same control for Bahdanau's (``make_bahdanau(uniform=True)``).
#: The Transformer is sized by ``num_hiddens`` (its model width; ``ffn_num_hiddens`` is four times it).
#: Options such as the Luong models' ``scaled`` scores are given when a model is built (``build_translator``;
#: the book recipes of ``compare.BOOK_RECIPES`` use them).
RNN_SIZES = ("embed_size", "num_hiddens", "num_layers")
TRANSLATORS = {
    "no attention": Translator("seq2seq", RNN_SIZES, {}),
    "Bahdanau": Translator("bahdanau", ("embed_size", "num_hiddens"), {}),
    "Bahdanau uniform": Translator("bahdanau", ("embed_size", "num_hiddens"), {"uniform": True}),
    "Luong dot": Translator("luong", RNN_SIZES, {"score": "dot"}),
    "Luong general": Translator("luong", RNN_SIZES, {"score": "general"}),
    "Luong concat": Translator("luong", RNN_SIZES, {"score": "concat"}),
    "Luong local-m": Translator("luong", (*RNN_SIZES, "half_width"), {"score": "general", "local": "monotonic"}),
    "Luong local-p": Translator("luong", (*RNN_SIZES, "half_width"), {"score": "general", "local": "predictive"}),
    "Luong uniform": Translator("luong", RNN_SIZES, {"score": "uniform"}),
    "Transformer": Translator("transformer", ("num_hiddens", "ffn_num_hiddens"), {"num_heads": 4, "num_blks": 2}),
}


#: the seven translators of chapter 6's comparison (``compare_translators``' default)
CHAPTER_6_TRANSLATORS = ("no attention", "Bahdanau", "Luong dot", "Luong general", "Luong concat", "Luong local-m",
                         "Luong local-p")


def build_model(config: dict) -> EncoderDecoder:
    """Rebuild a model from its ``config`` (``config['kind']`` names a builder in ``MODEL_BUILDERS``; the other
    entries are that builder's keyword arguments)."""
    if not isinstance(config, dict):
        raise ValueError(f"config must be a dict with a 'kind' (one of {sorted(MODEL_BUILDERS)}), got "
                         f"{type(config).__name__}")
    config = dict(config)
    kind = config.pop("kind", None)
    if kind not in MODEL_BUILDERS:
        raise ValueError(f"config['kind'] must be one of {sorted(MODEL_BUILDERS)}, got {kind!r}")
    return MODEL_BUILDERS[kind](**config)


def build_translator(name: str, data, embed_size: int = 256, num_hiddens: int = 256, num_layers: int = 1,
                     half_width: int = 2, device=None, **options) -> EncoderDecoder:
    """The model ``name`` (a key of ``TRANSLATORS``) sized for ``data``'s vocabularies.

    Each model takes the shared sizes its ``Translator`` lists; ``options`` (e.g. ``dropout=0.1``) are
    passed to its builder and override the ``Translator``'s own options. ``data`` has the vocabularies
    ``src_vocab`` and ``tgt_vocab`` (a ``TranslationData``); the shared sizes are positive ints (checked even
    where the model takes no such size, as a mistyped one would otherwise be ignored).
    """
    if name not in TRANSLATORS:
        raise ValueError(f"name must be one of {list(TRANSLATORS)}, got {name!r}")
    for size, value in (("embed_size", embed_size), ("num_hiddens", num_hiddens), ("num_layers", num_layers),
                        ("half_width", half_width)):  # checked even where this model takes no such size
        check_positive_int(size, value)
    if not all(hasattr(data, vocab) for vocab in ("src_vocab", "tgt_vocab")):
        raise ValueError(f"data must have the vocabularies src_vocab and tgt_vocab (a TranslationData), got "
                         f"{type(data).__name__}")
    kind, sizes, fixed = TRANSLATORS[name]
    shared = {"embed_size": embed_size, "num_hiddens": num_hiddens, "num_layers": num_layers, "half_width": half_width,
              "ffn_num_hiddens": 4 * num_hiddens}
    model = MODEL_BUILDERS[kind](len(data.src_vocab), len(data.tgt_vocab), **{size: shared[size] for size in sizes},
                                 **{**fixed, **options})
    return model if device is None else model.to(device)
