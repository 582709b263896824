"""Copy an ``attn_utils.MultiHeadAttention``'s weights into ``torch.nn.MultiheadAttention``, so the
two can be compared (tests) or timed on equal terms (benchmarks)."""

from __future__ import annotations

import torch


@torch.no_grad()
def copy_into_torch_attention(ours, theirs) -> None:
    """torch packs the three input projections into one ``in_proj_weight`` (queries, keys, values)."""
    theirs.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
    theirs.out_proj.weight.copy_(ours.W_o.weight)
    if ours.W_q.bias is not None:
        theirs.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
        theirs.out_proj.bias.copy_(ours.W_o.bias)
