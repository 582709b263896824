"""Every translator the course builds, listed in one place: rebuild one from its config, or build one by name.

``MODEL_BUILDERS`` maps a model's ``config["kind"]`` to the function that builds it (each builder
records that config in the model, so a checkpoint can rebuild its model with ``build_model``).
``TRANSLATORS`` names the translators chapters 4–6 compare, each a builder of ``MODEL_BUILDERS``
with fixed options; ``build_translator`` sizes one for a data set's vocabularies.
"""

from __future__ import annotations

from typing import NamedTuple

from .bahdanau import make_bahdanau
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
    """A translator of the comparison: the ``kind`` of model, which of the shared sizes it takes (besides
    ``embed_size`` and ``num_hiddens``, which all take) and the options it is built with."""

    kind: str
    sizes: tuple[str, ...]
    options: dict


#: name -> Translator, the models chapters 4–6 compare. Bahdanau's translator has one layer (a bidirectional
#: encoder), as in the paper; only the local models have a window.
TRANSLATORS = {
    "no attention": Translator("seq2seq", ("num_layers",), {}),
    "Bahdanau": Translator("bahdanau", (), {}),
    "Luong dot": Translator("luong", ("num_layers",), {"score": "dot"}),
    "Luong general": Translator("luong", ("num_layers",), {"score": "general"}),
    "Luong concat": Translator("luong", ("num_layers",), {"score": "concat"}),
    "Luong local-m": Translator("luong", ("num_layers", "window"), {"score": "general", "local": "monotonic"}),
    "Luong local-p": Translator("luong", ("num_layers", "window"), {"score": "general", "local": "predictive"}),
}


def build_model(config: dict) -> EncoderDecoder:
    """Rebuild a model from its ``config`` (``config['kind']`` names a builder in ``MODEL_BUILDERS``)."""
    config = dict(config)
    kind = config.pop("kind", None)
    if kind not in MODEL_BUILDERS:
        raise ValueError(f"config['kind'] must be one of {sorted(MODEL_BUILDERS)}, got {kind!r}")
    return MODEL_BUILDERS[kind](**config)


def build_translator(name: str, data, embed_size: int = 256, num_hiddens: int = 256, num_layers: int = 2,
                     window: int = 2, device=None) -> EncoderDecoder:
    """The model ``name`` (a key of ``TRANSLATORS``) sized for ``data``'s vocabularies."""
    if name not in TRANSLATORS:
        raise ValueError(f"name must be one of {list(TRANSLATORS)}, got {name!r}")
    kind, sizes, options = TRANSLATORS[name]
    shared = {"num_layers": num_layers, "window": window}
    model = MODEL_BUILDERS[kind](len(data.src_vocab), len(data.tgt_vocab), embed_size=embed_size,
                                 num_hiddens=num_hiddens, **{size: shared[size] for size in sizes}, **options)
    return model if device is None else model.to(device)
