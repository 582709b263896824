"""How often one attention call makes the host wait for the device (each count is a CUDA sync). Today's
counts are upper bounds, so that no change adds one unnoticed; the fused path is to reach zero."""

from __future__ import annotations

import pytest
import torch
from host_syncs import HostSyncs

from attn_utils.attention import DotProductAttention
from attn_utils.language_models import CausalLanguageModel
from attn_utils.multihead import MultiHeadAttention


def test_the_counter_counts_value_reads_and_data_dependent_shapes():
    x = torch.tensor([1.0, 0.0, 2.0])
    with HostSyncs() as syncs:
        x.sum().item(), bool(x.any()), x.tolist(), x.nonzero(), x[x > 0], x + 1, x @ x
    assert syncs.by_name == {"item": 1, "__bool__": 1, "tolist": 1, "nonzero": 1} and syncs.total == 4


def _calls():
    torch.manual_seed(0)
    q, lens = torch.randn(2, 4, 5, 8), torch.tensor([5, 3])
    attention, mha = DotProductAttention(0.0).eval(), MultiHeadAttention(32, 4, 0.0).eval()
    X, lm = torch.randn(2, 5, 32), CausalLanguageModel(30, 16, 32, 4, 2, max_len=32).eval()
    tokens = torch.randint(1, 30, (2, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, cache = lm(tokens)
    return {
        "fused dot-product attention, no mask": (lambda: attention(q, q, q), 1),
        "fused dot-product attention, valid lengths": (lambda: attention(q[:, 0], q[:, 0], q[:, 0], lens), 3),
        "multi-head self-attention, valid lengths": (lambda: mha(X, X, X, lens), 3),
        "a 2-block language model's forward pass": (lambda: lm(tokens), 2),
        "one cached decoding step": (lambda: lm(tokens[:, :1], cache), 2),
    }


@pytest.mark.parametrize("name", list(_calls()))
def test_attention_calls_sync_no_more_than_today(name):
    call, at_most = _calls()[name]
    with torch.no_grad(), HostSyncs() as syncs:
        call()
    assert syncs.total <= at_most, f"{name}: {syncs.total} host syncs ({dict(syncs.by_name)}), at most {at_most}"
