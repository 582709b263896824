"""Sampling from a language model: temperature, top-k, generation with or without a key-value cache.

* ``sampling_probs(logits, temperature, top_k)``: the distribution the next token is drawn from,
  ``softmax(top_k(logits) / T)``. As ``T -> 0`` it tends to all mass on the largest logit, shared equally
  by tied maxima, and every ``T > 0``, however tiny, gives that limit rather than NaN; ``T = 0`` itself is
  greedy decoding, all mass on the argmax (the first of tied maxima).
* ``top_k_filter``: keep the k largest logits of each row, ``-inf`` elsewhere (Fan et al., 2018).
* ``sample_from(probs, generator)``: one draw per row by inverting the cumulative distribution with a
  uniform number from ``generator``, so a seeded generator gives the same tokens on every device.
* ``generate(model, prompt, max_new_tokens, ...)``: extend a prompt, feeding one token at a time to a
  key-value cache or re-running the whole sequence at every step.
* ``time_generation`` and ``kv_cache_bytes``: what the cache saves in time, and what it costs in memory.
* ``filled_cache`` and ``decode_steps``: decoding timed at a given context length, without reading a
  prompt of that length first.
"""

from __future__ import annotations

import math
import statistics

import torch

from .checks import check_non_negative_int, check_positive_int, check_tokens, checks_read_values
from .kv_cache import KVCache
from .measure import interleaved_times
from .modes import evaluation_mode


def _check_temperature(temperature) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not math.isfinite(temperature) \
            or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature!r}")
    return float(temperature)


def _check_top_k(top_k) -> int | None:
    return None if top_k is None else check_positive_int("top_k", top_k, hint="or None (no filtering)")


def _check_generator(generator) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):  # a seed such as 0 is no generator
        raise ValueError(f"generator must be a torch.Generator (e.g. torch.Generator().manual_seed(0)) or None, got "
                         f"{generator!r}")


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """``logits`` ``(..., vocab)`` with all but the ``k`` largest of each row set to ``-inf``.

    Exactly ``k`` entries stay (all of them when ``k >= vocab``). Ties at the k-th place are broken by
    position: among equal logits the one with the lower index is kept (a stable sort).
    """
    k = _check_top_k(k)
    if not isinstance(logits, torch.Tensor) or logits.dim() < 1 or not logits.is_floating_point():
        got = f"shape {tuple(logits.shape)}, dtype {logits.dtype}" if isinstance(logits, torch.Tensor) \
            else type(logits).__name__
        raise ValueError(f"logits must be a float tensor (..., vocab), got {got}")
    if k >= logits.shape[-1]:
        return logits.clone()
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices[..., :k]  # (..., k)
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, order, True)
    return logits.masked_fill(~keep, float("-inf"))


def sampling_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None) -> torch.Tensor:
    """The next-token distribution ``softmax(top_k(logits) / temperature)``, ``(..., vocab)``, float.

    ``temperature = 0`` is greedy decoding: all the mass on the argmax (the first index among equal
    maxima), computed without dividing by 0. The largest logit is subtracted before dividing, so the
    largest scaled logit is 0 and the others can only underflow, to probability 0. A temperature so
    small that it is 0 in the logits' dtype (float32: below about 7e-46) would still give 0 / 0 = NaN:
    such rows get the limit of ``T -> 0+`` instead, all the mass shared equally by the maxima (as a tiny
    temperature that does not round to 0 gives it too). Any other temperature computes exactly the
    softmax above. ``top_k = 1`` is greedy too. NaN or +inf logits, and rows with no finite logit, raise.
    """
    temperature, top_k = _check_temperature(temperature), _check_top_k(top_k)
    if not isinstance(logits, torch.Tensor) or logits.dim() < 1 or logits.shape[-1] < 1 \
            or not logits.is_floating_point():
        got = f"shape {tuple(logits.shape)}, dtype {logits.dtype}" if isinstance(logits, torch.Tensor) \
            else type(logits).__name__
        raise ValueError(f"logits must be a float tensor (..., vocab), got {got}")
    if bool((torch.isnan(logits) | torch.isposinf(logits)).any()) \
            or not bool(torch.isfinite(logits).any(dim=-1).all()):
        raise ValueError("logits must have no NaN or +inf and at least one finite entry per row")
    if temperature == 0.0:
        best = logits.argmax(dim=-1, keepdim=True)  # (..., 1)
        return torch.zeros_like(logits).scatter_(-1, best, 1.0)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    shifted = logits - logits.max(dim=-1, keepdim=True).values  # (..., vocab), max 0
    # a banned token stays banned: its -inf divided by a temperature too large for the dtype (inf in it) is NaN
    scaled = (shifted / temperature).masked_fill(torch.isneginf(shifted), float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if temperature < torch.finfo(logits.dtype).tiny:  # T may be 0 (or flushed to 0) in this dtype
        maxima = (shifted == 0).to(probs.dtype)  # (..., vocab): the limit T -> 0+ shares the mass among them
        limit = maxima / maxima.sum(dim=-1, keepdim=True)
        probs = torch.where(probs.isnan().any(dim=-1, keepdim=True), limit, probs)  # only rows of 0 / 0
    return probs


def sample_from(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One index per row of ``probs`` ``(batch, vocab)``, drawn with one uniform number per row: ``(batch,)``.

    The uniform numbers come from ``generator`` (default: torch's global one) on the generator's own
    device and are moved to ``probs``'s, so the draws do not depend on where the model runs. An index
    with probability 0 is never returned. Each row must be finite and non-negative with a positive sum (it
    need not sum to 1): checked where ``checks_read_values`` says, since a NaN row would otherwise always
    draw the last index.
    """
    if not isinstance(probs, torch.Tensor) or probs.dim() != 2 or not probs.is_floating_point():
        got = f"shape {tuple(probs.shape)}, dtype {probs.dtype}" if isinstance(probs, torch.Tensor) \
            else type(probs).__name__
        raise ValueError(f"probs must be a float tensor (batch, vocab), got {got}")
    if probs.shape[1] < 1:  # no token to draw: the result was a (batch, 0) tensor, not one index per row
        raise ValueError(f"probs must hold at least one token per row (batch, vocab >= 1), got shape "
                         f"{tuple(probs.shape)}")
    _check_generator(generator)
    if probs.numel() and checks_read_values(probs) and not bool(
            ((probs >= 0) & (probs < float("inf"))).all() & (probs.sum(dim=-1) > 0).all()):
        raise ValueError("probs must be finite and non-negative, with a positive sum in every row")
    gen_device = generator.device if generator is not None else torch.device("cpu")
    u = torch.rand(probs.shape[0], 1, generator=generator, device=gen_device, dtype=torch.float64)
    p = probs.double()
    # A row whose sum overflows (float64 values near 1e308) is divided by its largest value first; the
    # others by exactly 1, so their draws are unchanged to the bit. No value is read: no host sync.
    peak = p.amax(dim=-1, keepdim=True)  # (batch, 1)
    scale = torch.where(p.sum(dim=-1, keepdim=True).isinf(), peak, torch.ones_like(peak))
    cdf = (p / scale).cumsum(dim=-1)  # (batch, vocab)
    target = u.to(probs.device) * cdf[:, -1:]  # (batch, 1), below the total, so rounding cannot overshoot
    index = torch.searchsorted(cdf, target, right=True).squeeze(1)  # first index whose cdf exceeds target
    return index.clamp(max=probs.shape[-1] - 1)


@torch.no_grad()
def generate(model, prompt: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
             use_cache: bool = True, generator: torch.Generator | None = None, return_logits: bool = False):
    """Extend ``prompt`` ``(batch, P)`` by ``max_new_tokens`` sampled tokens: ``(batch, P + max_new_tokens)``.

    ``model(X, cache)`` returns ``(logits, cache)`` (a ``CausalLanguageModel``). With ``use_cache``
    the prompt is fed once and then each new token alone; without, the whole sequence is fed again at
    every step (the same numbers, slower). Each step draws one uniform number per row from
    ``generator`` (``temperature=0`` draws none: greedy). ``return_logits=True`` also returns the
    logits each step sampled from, ``(batch, max_new_tokens, vocab)``. Generation does not stop at
    ``<eos>``: cut the rows where you need to.
    """
    check_tokens(prompt, "prompt")
    if prompt.shape[1] < 1:
        raise ValueError(f"prompt must hold at least one token (e.g. <bos>), got shape {tuple(prompt.shape)}")
    check_non_negative_int("max_new_tokens", max_new_tokens)
    temperature, top_k = _check_temperature(temperature), _check_top_k(top_k)
    if not isinstance(use_cache, bool):  # a string such as "no" would be truthy
        raise ValueError(f"use_cache must be True or False, got {use_cache!r}")
    if not isinstance(return_logits, bool):
        raise ValueError(f"return_logits must be True or False, got {return_logits!r}")
    _check_generator(generator)
    tokens, steps_logits, cache = prompt, [], None
    with evaluation_mode(model):
        for _ in range(max_new_tokens):
            if use_cache:
                logits, cache = model(tokens if cache is None else tokens[:, -1:], cache)
            else:
                logits, _ = model(tokens)  # the whole sequence again: (batch, length, vocab)
            last = logits[:, -1].float()  # (batch, vocab)
            if temperature == 0.0:
                token = last.argmax(dim=-1)
            else:
                token = sample_from(sampling_probs(last, temperature, top_k), generator)
            tokens = torch.cat([tokens, token.unsqueeze(1).to(tokens.dtype)], dim=1)
            steps_logits.append(last)
    if return_logits:
        vocab = model.dense.out_features if hasattr(model, "dense") else 0
        stacked = torch.stack(steps_logits, dim=1) if steps_logits else prompt.new_zeros(
            prompt.shape[0], 0, vocab, dtype=torch.float)
        return tokens, stacked
    return tokens


def kv_cache_bytes(num_blks: int, num_heads: int, length: int, head_dim: int, batch: int = 1,
                   dtype: torch.dtype = torch.float32) -> int:
    """Bytes of a key-value cache: ``2 (keys and values) * blocks * heads * length * head_dim * batch * size``,
    where ``num_heads`` counts the key/value heads (fewer than the query heads with grouped-query attention)."""
    for name, value in [("num_blks", num_blks), ("num_heads", num_heads), ("length", length),
                        ("head_dim", head_dim), ("batch", batch)]:
        check_non_negative_int(name, value)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype must be a torch.dtype (e.g. torch.float16), got {dtype!r}")
    itemsize = torch.empty((), dtype=dtype).element_size()
    return 2 * num_blks * num_heads * length * head_dim * batch * itemsize


def time_generation(model, lengths, *, batch: int = 1, prompt_len: int = 1, repeats: int = 5,
                    progress: bool = False) -> list[dict]:
    """Greedy generation of each of ``lengths`` new tokens with and without the cache, timed.

    Returns one dict per length: ``length``, ``cached_s`` and ``uncached_s`` (median seconds over
    ``repeats`` runs, after one untimed warm-up run of the shortest length), ``speedup``
    (uncached / cached medians) with ``speedup_min`` and ``speedup_max`` (the smallest and largest
    ratio of the two runs of one repeat), ``cached_ms_per_token``, ``uncached_ms_per_token`` and
    ``cache_bytes`` (the cache at the end, from ``kv_cache_bytes``). Both runs are checked to write the same tokens. The
    prompt is ``prompt_len`` random tokens; use an untrained model so no ``<eos>`` cuts anything short.
    """
    lengths = list(lengths)
    if not lengths or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in lengths):
        raise ValueError(f"lengths must be a non-empty list of ints >= 1, got {lengths!r}")
    check_positive_int("repeats", repeats)
    check_positive_int("batch", batch)
    check_positive_int("prompt_len", prompt_len)
    weight = model.embedding.weight
    device = weight.device
    vocab = weight.shape[0]
    prompt = torch.randint(vocab, (batch, prompt_len), generator=torch.Generator().manual_seed(0)).to(device)
    generate(model, prompt, min(lengths), temperature=0.0)  # warm-up: allocations, kernels
    generate(model, prompt, min(lengths), temperature=0.0, use_cache=False)
    outputs = {}  # the tokens of the latest run with and without the cache

    def run(n, use_cache):
        outputs[use_cache] = generate(model, prompt, n, temperature=0.0, use_cache=use_cache)

    results = []
    for n in lengths:
        # interleaved, so both see the same machine load (the warm-up above already ran)
        cached_runs, uncached_runs = interleaved_times([lambda n=n: run(n, True), lambda n=n: run(n, False)],
                                                       device, repeats=repeats, warmup=0)
        cached, uncached = statistics.median(cached_runs), statistics.median(uncached_runs)
        ratios = [u / c for c, u in zip(cached_runs, uncached_runs)]  # one speed-up per repeat
        if not torch.equal(outputs[True], outputs[False]):
            raise RuntimeError(f"cached and uncached generation of {n} tokens wrote different tokens")
        blk = model.blks[0].attention1
        cached_positions = prompt_len + n - 1
        if getattr(model, "window", None) is not None:
            cached_positions = min(cached_positions, model.window)  # a rolling cache
        results.append(dict(length=n, cached_s=cached, uncached_s=uncached, speedup=uncached / cached,
                            speedup_min=min(ratios), speedup_max=max(ratios),
                            cached_ms_per_token=1e3 * cached / n, uncached_ms_per_token=1e3 * uncached / n,
                            cache_bytes=kv_cache_bytes(len(model.blks), blk.num_kv_heads, cached_positions,
                                                       blk.head_dim, batch, weight.dtype)))
        if progress:
            r = results[-1]
            print(f"{n:5d} tokens: cached {r['cached_s']:.3f} s, uncached {r['uncached_s']:.3f} s, "
                  f"speed-up {r['speedup']:.1f}x")
    return results


def filled_cache(model, length: int, batch: int = 1):
    """A ``CausalLanguageModel``'s cache as after ``length`` tokens, holding random keys and values (the
    time of a decoding step does not depend on them): ``length`` positions, or the last ``window`` for a
    model with a sliding window. Its ``nbytes`` is the memory such a cache takes."""
    check_non_negative_int("length", length)
    empty = model.empty_cache(batch)
    kept = length if model.window is None else min(length, model.window)
    shape = (*empty.keys.shape[:3], kept, empty.keys.shape[-1])  # (blocks, batch, kv heads, kept, head size)
    random = dict(device=empty.keys.device, dtype=empty.keys.dtype)
    return KVCache(torch.randn(shape, **random), torch.randn(shape, **random), length)


@torch.no_grad()
def decode_steps(model, cache, steps: int = 16):
    """Feed ``steps`` greedy tokens one at a time after ``cache`` (the work of decoding at that context
    length); returns the extended cache."""
    check_non_negative_int("steps", steps)
    token = torch.zeros(cache.shape[1], 1, dtype=torch.long, device=cache.device)  # (batch, 1), no copy of the cache
    for _ in range(steps):
        logits, cache = model(token, cache)
        token = logits[:, -1:].argmax(-1)
    return cache
