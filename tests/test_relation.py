"""attn_utils.relation: Zhou et al.'s Att-BLSTM and SemEval-2010 Task 8's official score.

(The data is tested in test_data_relations.py, the SemEval reader in test_data_semeval.py.)

The model is checked against an independent reference: ``torch.nn.LSTM`` run on each sentence alone
(no padding, no packing) with the model's weights, then Zhou et al.'s four equations written out
by hand in the paper's column layout.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from attn_utils.data.relations import LABELS, make_relation_corpus, relation_tensors, relation_vocab
from attn_utils.evaluate import accuracy
from attn_utils.metrics import semeval_macro_f1
from attn_utils.relation import AttentionBiLSTM, last_states, sum_directions
from attn_utils.trainers import train_classifier

# ------------------------------------------------------------------ the model

def _reference_lstm(model: AttentionBiLSTM) -> nn.LSTM:
    """A separate nn.LSTM holding the model's weights."""
    lstm = model.lstm
    ref = nn.LSTM(lstm.input_size, lstm.hidden_size, batch_first=True, bidirectional=True).double()
    ref.load_state_dict(lstm.state_dict())
    return ref


def _by_hand(model: AttentionBiLSTM, ref: nn.LSTM, ids: torch.Tensor):
    """One sentence (no padding): H by nn.LSTM, then M, alpha, r, h* and the logits in column layout."""
    out, _ = ref(model.embedding.weight[ids].unsqueeze(0))  # (1, T, 2h)
    h = ref.hidden_size
    H = (out[0, :, :h] + out[0, :, h:]).T  # (h, T): the paper's H = [h_1, ..., h_T]
    w = model.attention.query
    M = torch.tanh(H)
    scores = [sum(float(w[k]) * float(M[k, t]) for k in range(h)) for t in range(H.shape[1])]
    top = max(scores)
    alpha = torch.tensor([math.exp(s - top) for s in scores], dtype=torch.float64)
    alpha = alpha / alpha.sum()  # (T,)
    r = H @ alpha  # (h,)
    h_star = torch.tanh(r)
    return model.classifier.weight @ h_star + model.classifier.bias, alpha


@torch.no_grad()
def test_model_equals_nn_lstm_and_the_four_equations():
    torch.manual_seed(0)
    model = AttentionBiLSTM(vocab_size=20, embed_size=5, hidden_size=4, num_classes=7).double().eval()
    ref = _reference_lstm(model)
    lengths = torch.tensor([6, 3, 1, 5])
    tokens = torch.randint(1, 20, (4, 6))
    tokens[torch.arange(6) >= lengths[:, None]] = 0  # <pad>
    logits = model(tokens, lengths)
    for i, n in enumerate(lengths.tolist()):
        want_logits, want_alpha = _by_hand(model, ref, tokens[i, :n])
        torch.testing.assert_close(logits[i], want_logits)
        torch.testing.assert_close(model.attention_weights[i, :n], want_alpha)
        assert torch.equal(model.attention_weights[i, n:], torch.zeros(6 - n, dtype=torch.float64))
    assert model.attention_weights.shape == (4, 6) and logits.shape == (4, 7)


@torch.no_grad()
def test_sum_directions_and_last_states_against_nn_lstm():
    torch.manual_seed(1)
    lstm = nn.LSTM(3, 4, batch_first=True, bidirectional=True).double()
    x = torch.randn(3, 5, 3, dtype=torch.float64)
    lengths = torch.tensor([5, 2, 4])
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, (h_n, _) = lstm(packed)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=5)
    torch.testing.assert_close(last_states(out, lengths), h_n[0] + h_n[1])  # each direction's final state
    for i, n in enumerate(lengths.tolist()):  # each sentence alone: forward reads left to right, backward the reverse
        alone, _ = lstm(x[i:i + 1, :n])
        fw = nn.LSTM(3, 4, batch_first=True).double()
        reverse = {k.replace("_reverse", ""): v for k, v in lstm.state_dict().items() if k.endswith("_reverse")}
        fw.load_state_dict(reverse)
        backward, _ = fw(x[i:i + 1, :n].flip(1))
        torch.testing.assert_close(sum_directions(out)[i, :n], alone[0, :, :4] + backward[0].flip(0))
    with pytest.raises(ValueError,
                       match=r"bidirectional LSTM output \(batch, steps, 2 \* hidden\), got Tensor \(3, 5\)"):
        sum_directions(torch.zeros(3, 5))


@torch.no_grad()
@pytest.mark.parametrize("pooling", ["attention", "mean", "last"])
def test_padding_changes_nothing(pooling):
    torch.manual_seed(2)
    model = AttentionBiLSTM(30, 6, 5, 4, pooling=pooling).eval()
    lengths = torch.tensor([7, 4, 2])
    tokens = torch.randint(1, 30, (3, 7))
    noisy = tokens.clone()
    noisy[torch.arange(7) >= lengths[:, None]] = 29  # whatever sits after the sentence
    tokens[torch.arange(7) >= lengths[:, None]] = 0
    logits = model(tokens, lengths)
    torch.testing.assert_close(model(noisy, lengths), logits)
    torch.testing.assert_close(model(tokens[1:2, :4]), logits[1:2])  # alone, unpadded
    torch.testing.assert_close(model(torch.cat([tokens[2:3, :2], torch.zeros(1, 30, dtype=torch.long)], 1),
                                     torch.tensor([2])), logits[2:3])  # a lot more padding
    if pooling == "attention":
        assert torch.equal(model.attention_weights[0, 2:], torch.zeros(30))
        model(tokens, lengths)
        assert model.attention_weights[1, 4:].abs().sum() == 0
        assert torch.allclose(model.attention_weights.sum(-1), torch.ones(3))
    else:
        assert model.attention_weights is None
    if pooling == "mean":
        H = model.encode(tokens, lengths)
        r = torch.stack([H[i, :n].mean(0) for i, n in enumerate(lengths.tolist())])
        torch.testing.assert_close(logits, model.classifier(torch.tanh(r)))


def test_overfits_32_sentences(one_thread):
    corpus = make_relation_corpus(32, 0, 0, seed=5, distractor_prob=0.5)
    vocab = relation_vocab(corpus.train)
    t = relation_tensors(corpus.train, vocab)
    torch.manual_seed(0)
    model = AttentionBiLSTM(len(vocab), 16, 16, len(LABELS), dropout=0.0)
    history = train_classifier(model, (t.tokens, t.lengths), t.labels, max_steps=150, batch_size=32, lr=0.02,
                               progress=False)
    # Far from the edges: over model seeds 0-7 accuracy was 1.0 and the loss 0.0021-0.0025 after 150 steps (0.005-0.006
    # already at step 75), from 2.93-2.99.
    assert accuracy(model, (t.tokens, t.lengths), t.labels) == 1.0
    assert history.loss[-1] < 0.05 < history.loss[0]


def test_bad_inputs_are_named():
    model = AttentionBiLSTM(10, 4, 3, 5)
    with pytest.raises(ValueError, match=r"token ids of shape \(batch, steps\).*got Tensor \(4,\)"):
        model(torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="integer dtype"):
        model(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 10\), got 0\.\.12"):
        model(torch.tensor([[0, 12]]))
    with pytest.raises(ValueError, match=r"lengths must lie in \[1, 3\].*got 0\.\.3"):
        model(torch.ones(2, 3, dtype=torch.long), torch.tensor([3, 0]))
    with pytest.raises(ValueError, match=r"lengths must be an integer tensor of shape \(2,\)"):
        model(torch.ones(2, 3, dtype=torch.long), torch.tensor([3]))
    with pytest.raises(ValueError, match="pooling must be one of"):
        AttentionBiLSTM(10, 4, 3, 5, pooling="max")
    with pytest.raises(ValueError, match=r"lengths must be an integer tensor of shape \(2,\)"):
        last_states(torch.zeros(2, 3, 4), torch.tensor([1, 2, 3]))


def test_runs_on_every_device(any_device):
    model = AttentionBiLSTM(12, 4, 3, 5).to(any_device).eval()
    tokens = torch.randint(1, 12, (3, 6), device=any_device)
    lengths = torch.tensor([6, 2, 4], device=any_device)
    logits = model(tokens, lengths)
    assert logits.device.type == any_device.type and logits.shape == (3, 5)
    assert model.attention_weights.device.type == any_device.type
    assert model.attention_weights[1, 2:].abs().sum().item() == 0
    out = model.bilstm(tokens, lengths)
    assert last_states(out, lengths).device.type == any_device.type


# ------------------------------------------------------------------ the official score

def test_macro_f1_by_hand():
    CE12, CE21, CW12, MT12, other = 0, 1, 2, 14, 18
    targets = [CE12, CE12, CE21, CW12, CW12, other, other]
    predictions = [CE12, CE21, CE21, CW12, other, CW12, MT12]
    # Cause-Effect: correct 2 (rows 0, 2), proposed 3, actual 3 -> P = R = F1 = 2/3
    # Component-Whole: correct 1 (row 3), proposed 2 (rows 3, 5), actual 2 -> P = R = F1 = 1/2
    # Message-Topic is predicted but never a target: not averaged; Other is never averaged.
    assert semeval_macro_f1(predictions, targets) == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert semeval_macro_f1([LABELS[i] for i in predictions], [LABELS[i] for i in targets]) == pytest.approx(7 / 12)
    assert semeval_macro_f1(torch.tensor(targets), torch.tensor(targets)) == 1.0
    assert semeval_macro_f1([CE21, CE12], [CE12, CE21]) == 0.0  # right type, wrong direction: wrong
    # precision and recall differ: Cause-Effect correct 1, proposed 1, actual 2 -> P 1, R 1/2, F1 2/3
    assert semeval_macro_f1([CE12, other], [CE12, CE12]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="every target is Other"):
        semeval_macro_f1([CE12], [other])
    with pytest.raises(ValueError, match="as many predictions as targets"):
        semeval_macro_f1([CE12], [CE12, CE12])
    with pytest.raises(ValueError, match=r"label indices in \[0, 19\), got 19"):
        semeval_macro_f1([19], [0])
