"""attn_utils: the tested building blocks of the course "Attention, from cues to Transformers".

Names and signatures follow d2l.ai where d2l has the same thing.
"""

from .data import DATA_ENV_VAR, BucketBatchSampler, TranslationData, Vocab, load_translation_data
from .device import DEVICE_ENV_VAR, available_devices, get_device, set_seed, try_gpu
from .lookup import hard_lookup, lookup_scores, soft_lookup
from .masking import lengths_to_mask, make_mask, masked_softmax, sequence_mask
from .metrics import alignment_error_rate, attention_aer, attention_alignment, bleu, corpus_bleu
from .plot import show_heatmaps

__version__ = "0.1.0"

__all__ = [
    "BucketBatchSampler",
    "DATA_ENV_VAR",
    "DEVICE_ENV_VAR",
    "TranslationData",
    "Vocab",
    "alignment_error_rate",
    "attention_aer",
    "attention_alignment",
    "available_devices",
    "bleu",
    "corpus_bleu",
    "get_device",
    "hard_lookup",
    "lengths_to_mask",
    "load_translation_data",
    "lookup_scores",
    "make_mask",
    "masked_softmax",
    "sequence_mask",
    "set_seed",
    "show_heatmaps",
    "soft_lookup",
    "try_gpu",
]
