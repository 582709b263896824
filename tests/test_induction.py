"""The in-context copying task and the head scores that find previous-token and induction heads."""

import pytest
import torch

from attn_utils import CausalLanguageModel
from attn_utils.evaluate import copy_accuracy
from attn_utils.induction import ablate_heads, head_scores, repeated_segments


def test_the_copy_determines_every_predictable_token_and_nothing_else_is_predictable():
    batch = repeated_segments(300, 40, 500, 3, 12, first_token=4, generator=torch.Generator().manual_seed(0))
    assert batch.tokens.shape == batch.predictable.shape == (300, 40)
    assert int(batch.tokens.min()) >= 4 and int(batch.tokens.max()) < 500
    assert set(batch.segment_lengths.tolist()) == set(range(3, 13))  # every length drawn at this size
    copy_positions = 0
    for row, a, b, L, pred in zip(batch.tokens.tolist(), batch.first.tolist(), batch.second.tolist(),
                                  batch.segment_lengths.tolist(), batch.predictable):
        assert a + L <= b and b + L <= 40
        assert row[b:b + L] == row[a:a + L]
        marked = pred.nonzero().flatten().tolist()
        assert set(marked) <= set(range(b, b + L - 1))  # inside the copy, never its last token
        for t in range(b, b + L - 1):  # marked exactly where the token occurred once before, at its source
            assert (t in marked) == (row[:t].count(row[t]) == 1)
        for t in marked:  # there the next token is the one that followed last time
            assert row[t + 1] == row[a + t - b + 1] == row[row.index(row[t]) + 1]
        copy_positions += L - 1
    assert int(batch.predictable.sum()) / copy_positions > 0.9  # clashes are rare with 496 tokens


def test_the_draws_are_reproducible_and_uniform_in_placement():
    def draw():
        return repeated_segments(2000, 32, 40, 4, 8, generator=torch.Generator().manual_seed(3))
    one, two = draw(), draw()
    assert torch.equal(one.tokens, two.tokens) and torch.equal(one.second, two.second)
    L = one.segment_lengths
    stretches = [one.first, one.second - one.first - L, 32 - one.second - L]  # before, between, after
    means = [x.float().mean().item() for x in stretches]
    assert min(int(x.min()) for x in stretches) == 0
    assert max(means) - min(means) < 0.5  # the three stretches around the two occurrences are alike
    assert one.tokens.float().mean().item() == pytest.approx(19.5, abs=0.3)  # tokens 0..39, all equally likely


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="do not fit"):
        repeated_segments(1, 10, 50, 2, 6)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        repeated_segments(1, 40, 20, 2, 6, first_token=19)
    with pytest.raises(ValueError, match="min_segment <= max_segment"):
        repeated_segments(1, 40, 50, 6, 2)


def test_head_scores_of_ideal_heads():
    tokens = torch.tensor([[5, 6, 7, 8, 6, 7, 8, 9]])  # 6 7 8 repeats: positions 4, 5, 6 saw their token before
    T = tokens.shape[1]
    previous = torch.zeros(1, 1, T, T)
    previous[0, 0, 0, 0] = 1.0
    previous[0, 0, torch.arange(1, T), torch.arange(T - 1)] = 1.0  # every position looks one back
    induction = torch.zeros(1, 1, T, T)
    induction[0, 0, :, 0] = 1.0
    for t, j in [(4, 1), (5, 2), (6, 3)]:  # token at t occurred at j: look at j + 1
        induction[0, 0, t] = 0.0
        induction[0, 0, t, j + 1] = 1.0
    uniform = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]
    layer = torch.cat([previous, induction, uniform[None, None]], dim=1)  # (1, 3 heads, T, T)
    scores = head_scores([layer, layer.flip(1)], tokens)
    assert scores["previous"][0].tolist() == pytest.approx([1.0, 1 / 7, (1 / 2 + 1 / 3 + 1 / 4 + 1 / 5 + 1 / 6 + 1 / 7
                                                                          + 1 / 8) / 7])
    assert scores["induction"][0].tolist() == pytest.approx([0.0, 1.0, (1 / 5 + 1 / 6 + 1 / 7) / 3])
    assert scores["induction"][1].tolist() == pytest.approx(scores["induction"][0].flip(0).tolist())
    # the previous-token head looks at the earlier occurrence j = t - 3 never; the induction head at j + 1 only
    assert scores["duplicate"][0].tolist() == pytest.approx([0.0, 0.0, (1 / 5 + 1 / 6 + 1 / 7) / 3])
    duplicate = torch.zeros(1, 1, T, T)
    duplicate[0, 0, :, 0] = 1.0
    for t, j in [(4, 1), (5, 2), (6, 3)]:
        duplicate[0, 0, t] = 0.0
        duplicate[0, 0, t, j] = 1.0
    assert head_scores([duplicate], tokens)["duplicate"].item() == pytest.approx(1.0)


def test_head_scores_refuse_what_they_cannot_score():
    with pytest.raises(ValueError, match="no token of the batch repeats"):
        head_scores([torch.full((1, 1, 3, 3), 1 / 3)], torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match="per layer"):
        head_scores([torch.ones(1, 1, 3, 4)], torch.tensor([[1, 2, 1]]))


def _small_model():
    torch.manual_seed(0)
    return CausalLanguageModel(20, 12, 24, 3, 2, max_len=16).double().eval()


def test_ablating_a_head_equals_zeroing_its_columns_of_w_o():
    model = _small_model()
    X = torch.randint(20, (4, 10), generator=torch.Generator().manual_seed(1))
    before, _ = model(X)
    with ablate_heads(model, [(1, 2), (0, 0)]):
        ablated, _ = model(X)
    after, _ = model(X)
    torch.testing.assert_close(after, before)  # the hooks are gone after the block
    by_hand = _small_model()
    with torch.no_grad():
        by_hand.blks[1].attention1.W_o.weight[:, 8:12] = 0  # head 2 of 3, width 4: columns 8..11
        by_hand.blks[0].attention1.W_o.weight[:, 0:4] = 0
    torch.testing.assert_close(ablated, by_hand(X)[0])
    assert (ablated - before).abs().max() > 1e-3  # the heads did contribute


def test_ablate_heads_names_bad_heads_and_removes_its_hooks_on_errors():
    model = _small_model()
    with pytest.raises(ValueError, match="head must lie in 0..2 \\(layer 0 has 3 heads\\), got 3"), \
            ablate_heads(model, [(0, 3)]):
        pass
    with pytest.raises(ValueError, match="layer must lie in 0..1, got 2"), ablate_heads(model, [(2, 0)]):
        pass
    with pytest.raises(RuntimeError), ablate_heads(model, [(0, 1)]):
        raise RuntimeError("inside")
    assert not model.blks[0].attention1.W_o._forward_pre_hooks


class _Copier(torch.nn.Module):
    """Predicts the copy perfectly from the batch it was built for (logits one-hot on the right token)."""

    def __init__(self, batch, wrong_rows=()):
        super().__init__()
        self.targets = batch.tokens[:, 1:].clone()
        self.targets[list(wrong_rows)] = (self.targets[list(wrong_rows)] + 1) % 50

    def forward(self, X):
        return torch.nn.functional.one_hot(self.targets, 50).double(), None


def test_copy_accuracy_counts_the_predictable_positions_only():
    batch = repeated_segments(10, 24, 50, 3, 6, generator=torch.Generator().manual_seed(0))
    assert copy_accuracy(_Copier(batch), batch) == 1.0
    wrong = batch.predictable[:3, :-1].sum() / batch.predictable[:, :-1].sum()
    assert copy_accuracy(_Copier(batch, wrong_rows=(0, 1, 2)), batch) == pytest.approx(1 - wrong.item())
    model = _Copier(batch).train()
    copy_accuracy(model, batch)
    assert model.training
