"""attn_utils: the tested building blocks of the course "Attention, from cues to Transformers".

Names and signatures follow d2l.ai where d2l has the same thing.
"""

from .attention import (
    AdditiveAttention,
    AttentionPooling,
    ConcatAttention,
    CosineAttention,
    DotProductAttention,
    GeneralAttention,
    LocationAttention,
    fused_dot_product_attention,
)
from .data import DATA_ENV_VAR, BucketBatchSampler, TranslationData, Vocab, load_translation_data
from .device import DEVICE_ENV_VAR, available_devices, get_device, set_seed, try_gpu
from .kernel_regression import (
    KERNELS,
    NWKernelRegression,
    bias_variance,
    error_vs_n,
    kernel,
    leave_one_out_mask,
    make_data,
    nadaraya_watson,
    train_nw,
    true_function,
)
from .lookup import hard_lookup, lookup_scores, soft_lookup
from .masking import lengths_to_mask, make_mask, masked_softmax, sequence_mask
from .metrics import alignment_error_rate, attention_aer, attention_alignment, bleu, corpus_bleu
from .plot import show_heatmaps, show_text_weights
from .classify import ClassifierHistory, accuracy, evidence_hit_rate, predict, train_classifier
from .pooling import AttentivePooling
from .scoring import additive_score, concat_score, cosine_score, dot_score, general_score, location_score
from .decoding import Decoded, beam_search, greedy_decode
from .evaluate import (
    Translation,
    alignment_error,
    bleu_by_length,
    evaluate_bleu,
    forced_attention,
    translate,
    translate_split,
)
from .bahdanau import BahdanauDecoder, make_bahdanau
from .compare import TRANSLATORS, build_translator, compare_translators, format_table, train_and_score
from .luong import LuongDecoder, local_attention_weights, make_luong
from .multihead import MultiHeadAttention, merge_heads, split_heads, transpose_output, transpose_qkv
from .positional import LearnedPositionalEncoding, PositionalEncoding, relative_shift_matrix, sinusoidal_encoding
from .transformer import (
    AddNorm,
    PositionWiseFFN,
    TransformerDecoder,
    TransformerDecoderBlock,
    TransformerEncoder,
    TransformerEncoderBlock,
    causal_mask,
    greedy_decode_uncached,
    make_transformer,
    transformer_attention,
)
from .widgets import attention_grid, transformer_attention_explorer
from .seq2seq import Decoder, Encoder, EncoderDecoder, Seq2SeqDecoder, Seq2SeqEncoder, build_model, make_seq2seq
from .train import History, load_checkpoint, plot_history, save_checkpoint, sequence_loss, train_seq2seq

__version__ = "0.1.0"

__all__ = [
    "AdditiveAttention",
    "AttentionPooling",
    "BucketBatchSampler",
    "ConcatAttention",
    "CosineAttention",
    "DATA_ENV_VAR",
    "DEVICE_ENV_VAR",
    "DotProductAttention",
    "GeneralAttention",
    "KERNELS",
    "LocationAttention",
    "NWKernelRegression",
    "TranslationData",
    "Vocab",
    "additive_score",
    "alignment_error_rate",
    "attention_aer",
    "attention_alignment",
    "available_devices",
    "bias_variance",
    "bleu",
    "concat_score",
    "corpus_bleu",
    "cosine_score",
    "dot_score",
    "error_vs_n",
    "fused_dot_product_attention",
    "general_score",
    "get_device",
    "hard_lookup",
    "kernel",
    "leave_one_out_mask",
    "lengths_to_mask",
    "load_translation_data",
    "location_score",
    "lookup_scores",
    "make_data",
    "make_mask",
    "masked_softmax",
    "nadaraya_watson",
    "sequence_mask",
    "set_seed",
    "show_heatmaps",
    "show_text_weights",
    "ClassifierHistory",
    "accuracy",
    "evidence_hit_rate",
    "predict",
    "train_classifier",
    "AttentivePooling",
    "soft_lookup",
    "train_nw",
    "true_function",
    "try_gpu",
    "Decoded",
    "beam_search",
    "greedy_decode",
    "Translation",
    "bleu_by_length",
    "evaluate_bleu",
    "translate",
    "translate_split",
    "alignment_error",
    "forced_attention",
    "Decoder",
    "Encoder",
    "EncoderDecoder",
    "Seq2SeqDecoder",
    "Seq2SeqEncoder",
    "build_model",
    "make_seq2seq",
    "BahdanauDecoder",
    "make_bahdanau",
    "LuongDecoder",
    "local_attention_weights",
    "make_luong",
    "TRANSLATORS",
    "build_translator",
    "compare_translators",
    "format_table",
    "train_and_score",
    "History",
    "load_checkpoint",
    "plot_history",
    "save_checkpoint",
    "sequence_loss",
    "train_seq2seq",
    "MultiHeadAttention",
    "merge_heads",
    "split_heads",
    "transpose_output",
    "transpose_qkv",
    "LearnedPositionalEncoding",
    "PositionalEncoding",
    "relative_shift_matrix",
    "sinusoidal_encoding",
    "AddNorm",
    "PositionWiseFFN",
    "TransformerDecoder",
    "TransformerDecoderBlock",
    "TransformerEncoder",
    "TransformerEncoderBlock",
    "causal_mask",
    "greedy_decode_uncached",
    "make_transformer",
    "transformer_attention",
    "attention_grid",
    "transformer_attention_explorer",
]
