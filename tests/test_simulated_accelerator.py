"""The simulated accelerator (tests/simulated_accelerator.py) catches what CUDA catches, and the package's
training, decoding and scoring paths run on it: CI's stand-in for a GPU, for where tensors live."""

from __future__ import annotations

import threading

import pytest
import torch
from simulated_accelerator import ACCELERATOR, DeviceMixError, SimulatedAccelerator, simulated

from attn_utils.data.loader import load_translation_data
from attn_utils.evaluate import (
    evaluate_bleu,
    forced_attention,
    loss_by_position,
    perplexity,
    predict_hidden_tokens,
    translate,
)
from attn_utils.language_models import CausalLanguageModel, MaskedLanguageModel
from attn_utils.losses import causal_lm_loss
from attn_utils.plot import show_heatmaps
from attn_utils.registry import TRANSLATORS, build_translator
from attn_utils.sampling import generate
from attn_utils.trainers import train_language_model, train_seq2seq
from attn_utils.widgets import draw_lookup, draw_nw_fit

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def mode():
    with SimulatedAccelerator() as active:
        yield active


@pytest.fixture(scope="module")
def grammar():
    return load_translation_data("grammar", num_train=64, min_freq=1, verbose=False)


# --- what it catches, as CUDA does ---------------------------------------------------------------------------

def test_a_cpu_tensor_beside_one_on_the_accelerator_raises(mode):
    x = torch.randn(2, 5).to(ACCELERATOR)
    assert x.device == ACCELERATOR and mode.on_accelerator(x)
    with pytest.raises(DeviceMixError, match=r"same device.*add.*of shapes \[\(5,\)\]"):
        x + torch.arange(5)  # the classic: arange without device=
    assert torch.equal((x + torch.arange(5, device=x.device)).cpu(), x.cpu() + torch.arange(5))
    with pytest.raises(DeviceMixError):
        x.gather(1, torch.zeros(2, 1, dtype=torch.long))  # chapter 6's crash: an index left on the CPU
    # as on CUDA: zero-dimensional CPU tensors mix, and CPU index tensors index
    assert mode.on_accelerator(x * torch.tensor(2.0)) and mode.on_accelerator(x[torch.tensor([1, 0])])


def test_numpy_and_cpu_generators_need_the_cpu(mode):
    x = torch.randn(3).to(ACCELERATOR)
    with pytest.raises(TypeError, match="use Tensor.cpu"):
        x.numpy()
    assert x.cpu().numpy().shape == (3,) and not mode.on_accelerator(x.cpu())
    with pytest.raises(DeviceMixError, match="CPU generator"):
        torch.randn(3, device=ACCELERATOR, generator=torch.Generator().manual_seed(0))
    with pytest.raises(DeviceMixError, match="CPU generator"):
        torch.multinomial(x.softmax(0), 1, generator=torch.Generator().manual_seed(0))


def test_modules_move_with_their_parameters_and_buffers(mode):
    layer = torch.nn.BatchNorm1d(4)
    assert not any(mode.on_accelerator(t) for t in (*layer.parameters(), *layer.buffers()))
    layer.to(ACCELERATOR)
    assert all(mode.on_accelerator(t) for t in (*layer.parameters(), *layer.buffers()))
    assert all(p.device == ACCELERATOR for p in layer.parameters())
    with pytest.raises(DeviceMixError):
        layer(torch.randn(3, 4))  # an input left on the CPU
    layer.cpu()
    assert not any(mode.on_accelerator(p) for p in layer.parameters())
    made = torch.nn.Linear(2, 2, device=ACCELERATOR)  # factories given the device
    assert all(mode.on_accelerator(p) for p in made.parameters())


def test_values_are_the_cpus_and_threads_inherit_the_mode(mode):
    torch.manual_seed(0)
    layer = torch.nn.GRU(3, 4, batch_first=True)
    x = torch.randn(2, 5, 3)
    want, _ = layer(x)
    got, _ = layer.to(ACCELERATOR)(x.to(ACCELERATOR))
    assert mode.on_accelerator(got) and torch.equal(got.cpu(), want)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(mode.on_accelerator(torch.ones(2, device=x.device))))
    thread.start()
    thread.join()
    assert seen == [False]  # x is a CPU tensor: its device is the CPU's in the thread too
    thread = threading.Thread(target=lambda: seen.append(mode.on_accelerator(torch.ones(2, device=got.device))))
    thread.start()
    thread.join()
    assert seen == [False, True]


def test_the_mode_leaves_nothing_behind():
    new_parameter, run = torch.nn.Parameter.__new__, threading.Thread.run
    with SimulatedAccelerator():
        assert torch.nn.Parameter.__new__ is not new_parameter
    assert torch.nn.Parameter.__new__ is new_parameter and threading.Thread.run is run
    assert simulated(torch.device("cuda")) == (not torch.cuda.is_available())
    if simulated(ACCELERATOR):
        with pytest.raises((AssertionError, RuntimeError)):  # outside the mode: a real request for CUDA
            torch.ones(2).to(ACCELERATOR)


# --- the package on the accelerator ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(TRANSLATORS))
def test_every_translator_trains_translates_and_scores_on_the_accelerator(name, grammar, mode):
    torch.manual_seed(0)
    model = build_translator(name, grammar, embed_size=8, num_hiddens=16)
    train_seq2seq(model, grammar, max_steps=2, batch_size=8, eval_points=1, progress=False, device=ACCELERATOR)
    assert all(mode.on_accelerator(p) for p in model.parameters())
    sentences = list(grammar.test.src[:3])
    out = translate(model, sentences, grammar, beam_size=2)
    assert len(out) == len(sentences)
    assert 0.0 <= evaluate_bleu(model, grammar, "test") <= 100.0
    if model.decoder.has_attention:
        weights = forced_attention(model, grammar, "test")
        assert weights and not any(mode.on_accelerator(w) for w in weights)  # on the CPU, for plotting


def test_a_language_model_trains_samples_and_scores_on_the_accelerator(mode):
    torch.manual_seed(0)
    model = CausalLanguageModel(30, 16, 32, 4, 2, max_len=32).to(ACCELERATOR)
    tokens = torch.randint(1, 30, (64, 12), generator=torch.Generator().manual_seed(0))

    def batch_loss(m, step):
        return causal_lm_loss(m, tokens[step % 8 * 8:(step % 8 + 1) * 8].to(ACCELERATOR), pad=0)

    train_language_model(model, batch_loss, max_steps=2, warmup=1, progress=False)
    prompt = tokens[:2, :3].to(ACCELERATOR)
    text = generate(model, prompt, 5, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(1))
    assert mode.on_accelerator(text) and text.shape == (2, 8)
    assert torch.equal(text, generate(model, prompt, 5, 1.0, 5, use_cache=False,
                                      generator=torch.Generator().manual_seed(1)))
    assert perplexity(model, [tokens[0], tokens[1]], context=8) > 1.0
    assert loss_by_position(model, [tokens[0], tokens[1]], context=4).shape == (4,)  # CPU sequences
    masked = MaskedLanguageModel(30, 16, 32, 4, 1).to(ACCELERATOR)
    guesses = predict_hidden_tokens(masked, tokens[0], context=6, mask_id=1, never=(0, 1))
    assert guesses.shape == (11,) and not mode.on_accelerator(guesses)


def test_figures_take_tensors_from_the_accelerator(mode):
    keys = torch.tensor([[0.0, 1.0], [2.0, 0.5], [1.0, 3.0]]).to(ACCELERATOR)
    values = torch.tensor([1.0, 2.0, 3.0]).to(ACCELERATOR)
    assert draw_lookup(torch.tensor([1.0, 1.0]).to(ACCELERATOR), keys, values) is not None
    x = torch.linspace(0, 5, 20).to(ACCELERATOR)
    assert draw_nw_fit(x, torch.sin(x), queries=torch.linspace(0, 5, 7).to(ACCELERATOR)) is not None
    assert show_heatmaps(torch.rand(1, 1, 3, 4).to(ACCELERATOR), "keys", "queries") is not None
