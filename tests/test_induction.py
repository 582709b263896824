"""The in-context copying task and the head scores that find previous-token and induction heads."""

import math

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


class _FixedCopier(torch.nn.Module):
    """Fixed logits and fixed attention weights, for a hand-computed ``copy_scores``."""

    def __init__(self, logits, weights):
        super().__init__()
        self.logits, self.weights = logits, weights
        self.attention_weights = None

    def forward(self, X):
        assert X.shape == self.logits.shape[:2]
        self.attention_weights = self.weights
        return self.logits, None


def test_copy_scores_of_a_hand_built_model():
    from attn_utils.evaluate import copy_scores
    from attn_utils.induction import RepeatedSegments

    tokens = torch.tensor([[5, 6, 7, 8, 6, 7, 8, 9]])  # 6 7 8 at 1..3 and again at 4..6
    predictable = torch.zeros(1, 8, dtype=torch.bool)
    predictable[0, 4:6] = True  # the copy but its last token: 4 predicts 7, 5 predicts 8
    batch = RepeatedSegments(tokens, torch.tensor([1]), torch.tensor([4]), torch.tensor([3]), predictable)
    T, V = 7, 10  # the model reads tokens 0..6
    logits = torch.zeros(1, T, V)
    logits[0, 4, 7] = torch.log(torch.tensor(9.0))  # p(7) = 9 / (9 + 9) = 1/2: right, loss log 2
    logits[0, 5, 0] = torch.log(torch.tensor(9.0))  # p(8) = 1 / 18: wrong, loss log 18
    previous, uniform, induction, duplicate = (torch.zeros(T, T) for _ in range(4))
    previous[0, 0] = 1.0
    previous[torch.arange(1, T), torch.arange(T - 1)] = 1.0
    uniform = torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]
    induction[:, 0] = duplicate[:, 0] = 1.0
    for t, j in [(4, 1), (5, 2), (6, 3)]:  # the token at t occurred at j
        induction[t, 0] = duplicate[t, 0] = 0.0
        induction[t, j + 1] = duplicate[t, j] = 1.0
    weights = [torch.stack([previous, uniform])[None], torch.stack([induction, duplicate])[None]]
    model = _FixedCopier(logits, weights).train()
    scores = copy_scores(model, batch)
    assert model.training  # put back as it was
    assert scores["copy accuracy"] == 0.5
    assert scores["copy loss"] == pytest.approx((math.log(2) + math.log(18)) / 2)  # = log 6
    expected = {  # by hand: queries 1..6 for "previous", the repeated tokens 4, 5, 6 for the other two
        "previous 1.1": 1.0, "previous 1.2": sum(1 / (t + 1) for t in range(1, 7)) / 6,
        "previous 2.1": 1 / 6, "previous 2.2": 1 / 6,  # only query 1, whose weight is on key 0
        "induction 1.1": 0.0, "induction 1.2": (1 / 5 + 1 / 6 + 1 / 7) / 3, "induction 2.1": 1.0,
        "induction 2.2": 0.0,
        "duplicate 1.1": 0.0, "duplicate 1.2": (1 / 5 + 1 / 6 + 1 / 7) / 3, "duplicate 2.1": 0.0,
        "duplicate 2.2": 1.0,
    }
    assert set(scores) == {"copy accuracy", "copy loss", *expected}
    for name, value in expected.items():
        assert scores[name] == pytest.approx(value), name
    assert set(copy_scores(model, batch, heads=False)) == {"copy accuracy", "copy loss"}


def test_fit_records_copy_scores_at_every_evaluation_and_head_curves_reads_them_back():
    from attn_utils import fit
    from attn_utils.evaluate import copy_scores, head_curves

    test = repeated_segments(50, 16, 20, 3, 6, generator=torch.Generator().manual_seed(2))
    model = _small_model().float()  # 2 layers of 3 heads
    draws = torch.Generator().manual_seed(0)

    def step_loss(model, step):
        tokens = repeated_segments(8, 16, 20, 3, 6, generator=draws).tokens
        logits, _ = model(tokens[:, :-1])
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 20), tokens[:, 1:].reshape(-1))

    history = fit(model, step_loss, max_steps=6, evaluate=lambda m: copy_scores(m, test), eval_every=2,
                  progress=False)
    steps, induction = head_curves(history, "induction")
    assert steps == history.eval_steps == [2, 4, 6]
    assert induction.shape == (3, 2, 3)
    now = copy_scores(model, test)  # the model as the last evaluation saw it
    assert now["copy accuracy"] == copy_accuracy(model, test) == history.evals["copy accuracy"][-1]
    assert now["copy loss"] == history.evals["copy loss"][-1]
    assert induction[-1, 1, 2].item() == pytest.approx(now["induction 2.3"])
    previous = head_curves(history, "previous")[1]
    assert previous[0, 0, 1].item() == pytest.approx(history.evals["previous 1.2"][0])
    with pytest.raises(ValueError, match="kind must be one of"):
        head_curves(history, "next")
    with pytest.raises(ValueError, match="no 'induction' head scores"):
        head_curves(fit(model, step_loss, max_steps=1, progress=False), "induction")


def test_train_copying_lm_is_the_sections_loop():
    """The recipe trains bitwise as section 11.4's own loop did (fit with the same batches, loss and optimiser)."""
    from attn_utils import fit
    from attn_utils.trainers import train_copying_lm

    def build():
        torch.manual_seed(3)
        return CausalLanguageModel(30, 16, 32, 2, 2, max_len=20, position_scheme="rotary")

    by_recipe = build()
    history = train_copying_lm(by_recipe, max_steps=5, seed=4, vocab_size=30, length=20, min_segment=3,
                               max_segment=8, batch_size=6, warmup=2)
    by_hand = build()
    batches = torch.Generator().manual_seed(4)

    def step_loss(model, step):  # the loop as the section wrote it
        tokens = repeated_segments(6, 20, 30, 3, 8, generator=batches).tokens
        logits, _ = model(tokens[:, :-1])
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 30), tokens[:, 1:].reshape(-1))

    expected = fit(by_hand, step_loss, max_steps=5, lr=3e-3, warmup=2, betas=(0.9, 0.98), progress=False)
    assert history.loss == expected.loss
    for got, want in zip(by_recipe.state_dict().values(), by_hand.state_dict().values()):
        assert torch.equal(got, want)
    assert not by_recipe.training


def test_a_batch_of_the_copying_task_slices_by_rows():
    batch = repeated_segments(6, 20, 30, 3, 8, generator=torch.Generator().manual_seed(1))
    assert len(batch) == 6 and len(batch[:4]) == 4 and len(batch[2]) == 1 and len(batch[-1]) == 1
    part = batch[1:3]
    assert torch.equal(part.tokens, batch.tokens[1:3]) and torch.equal(part.predictable, batch.predictable[1:3])
    assert part.first.tolist() == batch.first[1:3].tolist() and part.second.tolist() == batch.second[1:3].tolist()
    assert part.segment_lengths.tolist() == batch.segment_lengths[1:3].tolist()
    assert torch.equal(batch[-1].tokens, batch.tokens[5:])


def test_halfway_step_dates_a_jump_in_either_direction():
    from attn_utils.metrics import halfway_step

    steps = [25, 50, 75, 100, 125]
    assert halfway_step(steps, [0.06, 0.1, 0.3, 0.56, 0.9]) == 100  # halfway: 0.48
    assert halfway_step(steps, [5.1, 4.9, 2.9, 2.0, 0.4]) == 100  # halfway: 2.75; 2.9 is not yet below it
    assert halfway_step(steps, [0.2, 0.9, 0.1, 0.6, 0.5]) == 50  # the first crossing, whatever comes after
    assert halfway_step(steps[:1], [0.3]) == 25
    with pytest.raises(ValueError, match="one value per step"):
        halfway_step(steps, [0.1, 0.2])
