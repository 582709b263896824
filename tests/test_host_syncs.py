"""How often one attention call makes the host wait for the device (each count is a CUDA sync).

On an accelerator the default is none at all: the checks that read values (lengths in range, NaN and
inf) run there only under ``strict_checks()`` (``attn_utils.checks``). The calls run on the simulated
accelerator (``tests/simulated_accelerator.py``) where there is no GPU, so the count is CI's too; with
strict checks they look as on the CPU, and the count says how much that costs."""

from __future__ import annotations

import pytest
import torch
from host_syncs import HostSyncs
from simulated_accelerator import ACCELERATOR, SimulatedAccelerator

from attn_utils.attention import DotProductAttention
from attn_utils.checks import strict_checks
from attn_utils.language_models import CausalLanguageModel
from attn_utils.multihead import MultiHeadAttention
from attn_utils.transformer import make_transformer


def test_the_counter_counts_value_reads_and_data_dependent_shapes():
    x = torch.tensor([1.0, 0.0, 2.0])
    with HostSyncs(include_cpu=True) as syncs:
        x.sum().item(), bool(x.any()), x.tolist(), x.nonzero(), x[x > 0], x + 1, x @ x
    assert syncs.by_name == {"item": 1, "__bool__": 1, "tolist": 1, "nonzero": 1} and syncs.total == 4
    with HostSyncs() as cpu_reads_free:
        x.sum().item()
    with SimulatedAccelerator(), HostSyncs() as accelerator_reads:
        x.to(ACCELERATOR).sum().item(), bool(x.to(ACCELERATOR).any())
    assert cpu_reads_free.total == 0 and accelerator_reads.by_name == {"item": 1, "__bool__": 1}


def _language_model(**options):
    return CausalLanguageModel(30, 16, 32, 4, 2, max_len=32, **options).eval()


def _calls(device):
    """{name: (call, host syncs under strict checks)}, everything built on ``device``."""
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 5, 8, generator=generator).to(device)
    lens_here, lens_on_device = torch.tensor([5, 3]), torch.tensor([5, 3]).to(device)
    X = torch.randn(2, 5, 32, generator=generator).to(device)
    torch.manual_seed(0)
    attention, mha = DotProductAttention(0.0).eval(), MultiHeadAttention(32, 4, 0.0).to(device).eval()
    training_mha = MultiHeadAttention(32, 4, 0.5).to(device).train()  # dropout: the explicit path
    tokens = torch.randint(1, 30, (2, 6), generator=generator).to(device)
    variants = [(), (("position_scheme", "rotary"),), (("position_scheme", "alibi"), ("window", 3)),
                (("num_kv_heads", 2),)]
    models = {options: _language_model(**dict(options)).to(device) for options in variants}
    with torch.no_grad():
        _, cache = models[()](tokens)
    translator = make_transformer(30, 30, 32, 64, 4, 2).to(device).eval()
    return {
        "fused dot-product attention, no mask": (lambda: attention(q, q, q), 1),
        "fused dot-product attention, lengths on the device": (
            lambda: attention(q[:, 0], q[:, 0], q[:, 0], lens_on_device), 3),
        "fused dot-product attention, lengths still on the CPU": (
            lambda: attention(q[:, 0], q[:, 0], q[:, 0], lens_here), 3),
        "multi-head self-attention, lengths": (lambda: mha(X, X, X, lens_on_device), 3),
        "multi-head self-attention with dropout (explicit path), lengths": (
            lambda: training_mha(X, X, X, lens_on_device), 5),
        # a model's pass: one look at its token ids (in [0, vocab_size)?) per embedding, then the attention's
        "a 2-block language model's forward pass": (lambda: models[()](tokens), 3),
        "the same with rotary positions": (lambda: models[(("position_scheme", "rotary"),)](tokens), 3),
        "the same with ALiBi and a window": (lambda: models[(("position_scheme", "alibi"), ("window", 3))](tokens), 5),
        "the same with grouped-query attention": (lambda: models[(("num_kv_heads", 2),)](tokens), 3),
        "one cached decoding step": (lambda: models[()](tokens[:, :1], cache), 3),
        "a translator's teacher-forced pass, source lengths": (
            lambda: translator(tokens, tokens, lens_on_device + 1), 16),
    }


NAMES = list(_calls("cpu"))


def _count(name, strict: bool) -> HostSyncs:
    with SimulatedAccelerator():
        call, _ = _calls(ACCELERATOR)[name]
        with torch.no_grad(), strict_checks(strict), HostSyncs() as syncs:
            call()
    return syncs


@pytest.mark.parametrize("name", NAMES)
def test_no_attention_call_waits_for_an_accelerator(name):
    syncs = _count(name, strict=False)
    assert syncs.total == 0, f"{name}: {syncs.total} host syncs on the accelerator ({dict(syncs.by_name)})"


@pytest.mark.parametrize("name", NAMES)
def test_strict_checks_read_the_values_on_an_accelerator_too(name):
    """The same calls under strict checks: they do look (so the default's zero means something), and no
    change adds a sync unnoticed."""
    syncs, at_most = _count(name, strict=True), _calls("cpu")[name][1]
    assert 0 < syncs.total <= at_most, f"{name}: {syncs.total} syncs ({dict(syncs.by_name)}), expected 1..{at_most}"


def test_lengths_on_the_cpu_are_checked_before_they_move():
    """Lengths that come from the CPU are read there, at no cost to the device: a bad one is refused even
    on the accelerator, outside strict checks."""
    with SimulatedAccelerator():
        q = torch.randn(2, 5, 8).to(ACCELERATOR)
        with pytest.raises(ValueError, match="at most the number of keys"):
            DotProductAttention(0.0)(q, q, q, torch.tensor([5, 6]))
        with pytest.raises(ValueError, match=">= 0"):
            DotProductAttention(0.0)(q, q, q, torch.tensor([5, -1]))
        assert DotProductAttention(0.0)(q, q, q, torch.tensor([5, 6]).to(ACCELERATOR)).shape == (2, 5, 8)
        with strict_checks(), pytest.raises(ValueError, match="at most the number of keys"):
            DotProductAttention(0.0)(q, q, q, torch.tensor([5, 6]).to(ACCELERATOR))


def test_token_ids_are_read_on_the_cpu_and_on_an_accelerator_only_under_strict_checks():
    """An id beyond the vocabulary is a device-side assert on a GPU: refused by name where it can be read for
    free (the CPU), and on the accelerator under strict checks; otherwise only its dtype is checked."""
    model = _language_model()
    with pytest.raises(ValueError, match=r"token ids must be integers in \[0, vocab_size=30\), got ids from 1 to 30"):
        model(torch.tensor([[1, 30]]))
    with SimulatedAccelerator():
        model = model.to(ACCELERATOR)
        bad = torch.tensor([[1, 30]]).to(ACCELERATOR)
        with strict_checks(), pytest.raises(ValueError, match="vocab_size=30"):
            model(bad)
        with HostSyncs() as syncs, pytest.raises(IndexError):  # the simulated device runs on the CPU: torch's error
            model(bad)
        assert syncs.total == 0
        with pytest.raises(ValueError, match="token ids must be integers .* got dtype torch.uint8"):
            model(torch.ones(1, 2, dtype=torch.uint8).to(ACCELERATOR))
