"""attn_utils: the tested building blocks of the course "Attention, from cues to Transformers".

Names and signatures follow d2l.ai where d2l has the same thing. The top level holds the names the
chapters, the benchmarks and the README use; everything else is imported from its module
(``from attn_utils.masking import lengths_to_mask``).

The modules form layers, and none reaches up (``tests/test_layering.py`` reads the imports): the
foundation (``device``, ``modes``, ``checks``, ``budgets``, ``tolerance``, ``canvas``); the models,
their layers and their losses (``losses``), which import nothing above them; the data modules
(``data.*``), which import no model; training (``training_loop``, ``trainers``); evaluation
(``evaluate`` runs a model over data, ``metrics`` scores what it produced, ``measure`` times and
weighs, ``checkpoints`` saves and loads); and on top the figures, widgets and the course's
comparisons. Which module serves which chapter:

=======================================  ===========================================  ==========================
chapter                                  modules                                      exercise checkers
=======================================  ===========================================  ==========================
1   Attention cues                       ``lookup``                                   ``exercises.ch01``
2   Attention pooling: Nadaraya–Watson   ``kernel_regression``                        ``exercises.ch02``
3   Scoring functions                    ``scoring``, ``attention``                   ``exercises.ch03``
4   Encoder–decoder without attention    ``seq2seq``, ``decoding``                    ``exercises.ch04``
5   Bahdanau attention                   ``bahdanau``                                 ``exercises.ch05``
6   Luong attention                      ``luong``, ``registry``, ``compare``,        ``exercises.ch06``
                                         ``stored_results``
7   Attention beyond translation         ``pooling``, ``packed``                      (one per section:)
7a  Soft and hard attention              ``glimpse``, ``canvas``, ``data.digits``     ``exercises.ch07_images``
7b  Relation classification              ``relation``, ``data.relations``,            ``exercises.ch07_relations``
                                         ``data.semeval``
7c  Hierarchical attention               ``han``, ``data.reviews``                    ``exercises.ch07_documents``
8   Self-attention, positions            ``positional``, ``masking.causal_mask``      ``exercises.ch08``
9   Multi-head attention                 ``multihead``                                ``exercises.ch09``
10  The Transformer                      ``transformer``, ``kv_cache``                ``exercises.ch10``
11  Attention today                      (its sections:)
11a GPT- and BERT-style models           ``language_models``, ``sampling``,           ``exercises.ch11_models``
                                         ``ngram``, ``data.moby_dick``,
                                         ``data.subwords``, ``data.windows``,
                                         ``evaluate``
11b Making attention fast                ``online_softmax``, ``fast_attention``       ``exercises.ch11_fast``
11c Positions and heads in today's       ``rotary``, ``alibi``,                       ``exercises.ch11_modern``
    models                               ``causal_attention``,
                                         ``masking.sliding_window_mask``
11d Induction heads                      ``induction``                                ``exercises.ch11_induction``
11e FlashAttention on a GPU              ``triton_attention``,                        ``exercises.ch11_kernel``
                                         ``attention.set_attention_kernel``
shared: device and seed, model modes     ``device``, ``modes``
shared: masks, argument checks           ``masking``, ``checks``
shared: the losses                       ``losses``
shared: budgets, the training loop, the  ``budgets``, ``training_loop``,
task trainers, checkpoints               ``trainers``, ``checkpoints``
shared: evaluation: running a model      ``evaluate``, ``metrics``
over data, and the scores
shared: translation data (chapters       ``data.loader``, ``data.tatoeba``,
4–6, 10, 11a)                            ``data.text``, ``data.vocab``,
                                         ``data.batching``, ``data.splits``,
                                         ``data.cache``, ``data.paths``,
                                         ``data.grammar``, ``data.dates``,
                                         ``data.bundled``, ``data.generate``
shared: figures, widgets, measurements   ``plot``, ``widgets``, ``measure``,
                                         ``diagrams``
shared: stored benchmark runs (GPU       ``stored_results``
results beside the live ones)
shared: tolerances on every device       ``tolerance``
shared: exercise checking                                                             ``exercises.core``
=======================================  ===========================================  ==========================
"""

# Shared: device and seed, budgets and the training loop, figures, measurements (live and stored)
from .budgets import budget as budget
from .device import get_device as get_device
from .device import set_seed as set_seed
from .measure import environment as environment
from .plot import show_heatmaps as show_heatmaps
from .plot import show_text_weights as show_text_weights
from .stored_results import load_stored_run as load_stored_run
from .training_loop import fit as fit

# isort: split
# Chapter 1: attention cues, soft and hard lookup
from .lookup import hard_lookup as hard_lookup
from .lookup import soft_lookup as soft_lookup

# isort: split
# Chapter 2: Nadaraya–Watson kernel regression
from .kernel_regression import KERNELS as KERNELS
from .kernel_regression import NWKernelRegression as NWKernelRegression
from .kernel_regression import bias_variance as bias_variance
from .kernel_regression import error_vs_n as error_vs_n
from .kernel_regression import kernel as kernel
from .kernel_regression import leave_one_out_mask as leave_one_out_mask
from .kernel_regression import make_data as make_data
from .kernel_regression import nadaraya_watson as nadaraya_watson
from .kernel_regression import true_function as true_function
from .trainers import train_nw as train_nw

# isort: split
# Chapter 3: the masked softmax, scoring functions and the layers built on them
from .attention import AdditiveAttention as AdditiveAttention
from .attention import ConcatAttention as ConcatAttention
from .attention import CosineAttention as CosineAttention
from .attention import DistanceAttention as DistanceAttention
from .attention import DotProductAttention as DotProductAttention
from .attention import GeneralAttention as GeneralAttention
from .attention import LocationAttention as LocationAttention
from .attention import fused_dot_product_attention as fused_dot_product_attention
from .masking import make_mask as make_mask
from .masking import masked_softmax as masked_softmax
from .scoring import cosine_score as cosine_score

# isort: split
# Chapter 4: translation data, the encoder-decoder, decoding, BLEU, training and checkpoints
from .checkpoints import load_checkpoint as load_checkpoint
from .checkpoints import save_checkpoint as save_checkpoint
from .data import load_translation_data as load_translation_data
from .decoding import greedy_decode as greedy_decode
from .evaluate import bleu_report as bleu_report
from .evaluate import evaluate_bleu as evaluate_bleu
from .evaluate import translate as translate
from .evaluate import translate_split as translate_split
from .losses import sequence_loss as sequence_loss
from .metrics import bleu_by_length as bleu_by_length
from .metrics import corpus_bleu as corpus_bleu
from .plot import plot_history as plot_history
from .seq2seq import EncoderDecoder as EncoderDecoder
from .seq2seq import Seq2SeqDecoder as Seq2SeqDecoder
from .seq2seq import Seq2SeqEncoder as Seq2SeqEncoder
from .seq2seq import make_seq2seq as make_seq2seq
from .trainers import train_seq2seq as train_seq2seq

# isort: split
# Chapter 5: Bahdanau attention, and attention scored against gold alignments
from .bahdanau import BahdanauDecoder as BahdanauDecoder
from .bahdanau import make_bahdanau as make_bahdanau
from .evaluate import alignment_error as alignment_error
from .evaluate import forced_attention as forced_attention
from .metrics import attention_aer as attention_aer

# isort: split
# Chapter 6: Luong attention, the book recipes of every translator, and their stored comparison
from .compare import BOOK_RECIPES as BOOK_RECIPES
from .compare import BOOK_STEPS as BOOK_STEPS
from .compare import compare_translators as compare_translators
from .compare import train_recipe as train_recipe
from .luong import LuongDecoder as LuongDecoder
from .luong import local_attention_weights as local_attention_weights
from .luong import make_luong as make_luong
from .registry import TRANSLATORS as TRANSLATORS
from .stored_results import format_summary as format_summary
from .stored_results import load_translator_results as load_translator_results
from .stored_results import plot_curves as plot_curves
from .stored_results import summarize_runs as summarize_runs

# isort: split
# Chapter 7: classifiers trained with attention (all three sections)
from .evaluate import accuracy as accuracy
from .evaluate import predict as predict
from .metrics import evidence_hit_rate as evidence_hit_rate
from .metrics import spread as spread
from .metrics import steps_to_reach as steps_to_reach
from .plot import plot_seed_curves as plot_seed_curves
from .pooling import LearnedQueryPooling as LearnedQueryPooling
from .trainers import train_classifier as train_classifier
from .trainers import train_seeds as train_seeds

# isort: split
# Chapter 7a: soft and hard attention over images
from .data.digits import digit_split as digit_split
from .data.digits import make_digit_canvases as make_digit_canvases
from .glimpse import GlimpseClassifier as GlimpseClassifier
from .glimpse import count_flops as count_flops
from .glimpse import exact_scorer_gradient as exact_scorer_gradient
from .glimpse import reinforce_surrogate as reinforce_surrogate
from .glimpse import scorer_gradient_samples as scorer_gradient_samples
from .glimpse import show_glimpses as show_glimpses

# isort: split
# Chapter 7b: relation classification
from .data.relations import make_relation_corpus as make_relation_corpus
from .data.semeval import SEMEVAL_ENV_VAR as SEMEVAL_ENV_VAR
from .data.semeval import load_semeval_splits as load_semeval_splits
from .relation import AttentionBiLSTM as AttentionBiLSTM

# isort: split
# Chapter 7c: hierarchical attention networks
from .han import HierarchicalAttentionNetwork as HierarchicalAttentionNetwork

# isort: split
# Chapter 8: self-attention and positional encoding
from .masking import causal_mask as causal_mask
from .positional import LearnedPositionalEncoding as LearnedPositionalEncoding
from .positional import PositionalEncoding as PositionalEncoding
from .positional import relative_shift_matrix as relative_shift_matrix
from .positional import sinusoidal_encoding as sinusoidal_encoding

# isort: split
# Chapter 9: multi-head attention
from .multihead import MultiHeadAttention as MultiHeadAttention
from .multihead import split_heads as split_heads
from .multihead import transpose_output as transpose_output
from .multihead import transpose_qkv as transpose_qkv

# isort: split
# Chapter 10: the Transformer
from .kv_cache import KVCache as KVCache
from .transformer import AddNorm as AddNorm
from .transformer import PositionWiseFFN as PositionWiseFFN
from .transformer import TransformerDecoder as TransformerDecoder
from .transformer import TransformerDecoderBlock as TransformerDecoderBlock
from .transformer import TransformerEncoderBlock as TransformerEncoderBlock
from .transformer import make_transformer as make_transformer
from .transformer import transformer_attention as transformer_attention
from .widgets import attention_grid as attention_grid
from .widgets import transformer_attention_explorer as transformer_attention_explorer

# isort: split
# Chapter 11a: decoder-only and encoder-only models, sampling, the key-value cache
from .language_models import CausalLanguageModel as CausalLanguageModel
from .language_models import MaskedLanguageModel as MaskedLanguageModel
from .language_models import bert_mask as bert_mask
from .language_models import mask_tokens as mask_tokens
from .losses import IGNORE_INDEX as IGNORE_INDEX
from .sampling import generate as generate
from .sampling import kv_cache_bytes as kv_cache_bytes
from .sampling import sampling_probs as sampling_probs
from .sampling import time_generation as time_generation
from .trainers import train_language_model as train_language_model

# isort: split
# Chapter 11b: making attention fast
from .attention import set_attention_kernel as set_attention_kernel
from .fast_attention import FlashAttentionFunction as FlashAttentionFunction
from .fast_attention import tiled_attention as tiled_attention
from .measure import attention_memory as attention_memory
from .measure import interleaved_medians as interleaved_medians
from .measure import loglog_slope as loglog_slope
from .measure import saved_tensor_bytes as saved_tensor_bytes
from .online_softmax import merge_attention_blocks as merge_attention_blocks
from .online_softmax import online_softmax as online_softmax

# isort: split
# Chapter 11c: positions and heads in today's models
from .alibi import alibi_bias as alibi_bias
from .alibi import alibi_slopes as alibi_slopes
from .masking import sliding_window_mask as sliding_window_mask
from .rotary import apply_rotary as apply_rotary

__version__ = "0.1.0"
