"""attn_utils.relation: the generated corpus, the SemEval reader, Zhou et al.'s Att-BLSTM and the official score.

The model is checked against an independent reference: ``torch.nn.LSTM`` run on each sentence alone
(no padding, no packing) with the model's weights, then Zhou et al.'s four equations written out
by hand in the paper's column layout.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from attn_utils.classify import accuracy, train_classifier
from attn_utils.relation import (
    ADJECTIVES,
    ADVERBS,
    CLOSERS,
    CONJUNCTIONS,
    CUES,
    DETERMINERS,
    ENTITY_MARKERS,
    LABELS,
    NOUNS,
    OPENERS,
    RARE_CUES,
    SEMEVAL_ENV_VAR,
    AttentionBiLSTM,
    RelationExample,
    check_markers,
    cue_words,
    last_states,
    load_semeval,
    load_semeval_splits,
    make_relation_corpus,
    relation_tensors,
    relation_type,
    relation_vocab,
    semeval_macro_f1,
    sum_directions,
)

# ------------------------------------------------------------------ the generated corpus

def test_same_seed_same_corpus_other_seed_other_corpus():
    a, b = make_relation_corpus(50, 10, 20, seed=3), make_relation_corpus(50, 10, 20, seed=3)
    assert a == b
    c = make_relation_corpus(50, 10, 20, seed=4)
    assert [e.tokens for e in a.train] != [e.tokens for e in c.train]
    assert (len(a.train), len(a.val), len(a.test)) == (50, 10, 20)


@pytest.mark.parametrize("kwargs", [{}, {"distractor_prob": 1.0, "distractors": 3, "filler": 2}])
def test_evidence_is_the_cue_word_between_the_entities(kwargs):
    corpus = make_relation_corpus(400, 0, 100, seed=1, **kwargs)
    words = cue_words()
    for e in corpus.train + corpus.test:
        check_markers(e.tokens)
        cue = e.tokens[e.evidence]
        assert e.label in words[cue], (cue, e.label)  # the evidence is a cue word of this very label
        start, stop = e.cue_span
        assert start <= e.evidence < stop
        phrase = " ".join(e.tokens[start:stop])
        assert phrase in {p.replace("*", "") for p in CUES[e.label] + RARE_CUES[e.label]}
        assert e.tokens.index("</e1>") < start and stop <= e.tokens.index("<e2>")  # between the entities
        for d in e.distractors:  # the distracting cues state relations of other types
            assert d != e.evidence and not start <= d < stop
            assert relation_type(e.label) not in {relation_type(label) for label in words[e.tokens[d]]}
        assert e.tokens.count(cue) == 1 or cue == "and"  # the evidence word occurs only there
        if kwargs:
            assert len(e.distractors) == 3


def test_every_label_occurs_and_no_sentence_is_in_two_splits():
    corpus = make_relation_corpus(1500, 200, 500, seed=0)
    assert {e.label for e in corpus.train} == set(LABELS)
    assert {e.label for e in corpus.test} == set(LABELS)
    sentences = [e.tokens for e in corpus.train + corpus.val + corpus.test]
    assert len(set(sentences)) == len(sentences)
    with_distractor = sum(bool(e.distractors) for e in corpus.train) / len(corpus.train)
    assert 0.45 < with_distractor < 0.55  # distractor_prob=0.5
    common = cue_words(rare=False)
    rare = sum(e.tokens[e.evidence] not in common for e in corpus.train) / len(corpus.train)
    assert 0.03 < rare < 0.07  # rare_prob=0.05


def test_cue_words_are_not_filler_and_phrase_glue_is_shared():
    cues = set(cue_words())
    filler = set(NOUNS) | set(ADJECTIVES) | set(ADVERBS) | set(DETERMINERS) | set(CONJUNCTIONS)
    filler |= {w for phrase in OPENERS + CLOSERS for w in phrase}
    assert not cues & filler
    assert not cues & set(ENTITY_MARKERS)
    assert all(len({relation_type(label) for label in labels}) == 1 for labels in cue_words().values())
    assert set(cue_words(rare=False)) < set(cue_words())
    glue: dict[str, set[str]] = {}  # non-evidence words of cue phrases -> relation types using them
    for label in LABELS:
        for phrase in CUES[label] + RARE_CUES[label]:
            for w in phrase.split():
                if not w.startswith("*"):
                    glue.setdefault(w, set()).add(relation_type(label))
    assert all(len(kinds) >= 2 or w in filler for w, kinds in glue.items()), glue
    assert len(LABELS) == 19 and LABELS[-1] == "Other" and set(CUES) == set(RARE_CUES) == set(LABELS)


def test_bad_corpus_arguments_are_named():
    with pytest.raises(ValueError, match="distractor_prob must lie in"):
        make_relation_corpus(10, 0, 0, distractor_prob=1.5)
    with pytest.raises(ValueError, match="distractors must be 1, 2 or 3"):
        make_relation_corpus(10, 0, 0, distractors=4)
    with pytest.raises(ValueError, match="expected one of the 19 SemEval labels"):
        relation_type("Cause-Effect")


# ------------------------------------------------------------------ the SemEval-2010 Task 8 reader

MADE_UP = (
    '8001\t"The <e1>kettle</e1> was left inside the old <e2>garden shed</e2>."\r\n'
    "Content-Container(e1,e2)\r\n"
    "Comment:\r\n"
    "\r\n"
    '8002\t"A <e1>spark</e1> from the wire caused the <e2>fire</e2>, said O\'Neil."\r\n'
    "Cause-Effect(e1,e2)\r\n"
    "Comment: a made-up sentence\r\n"
    "\r\n"
    '8003\t"The <e1>choir</e1> sang next to the <e2>well-known museum</e2>."\r\n'
    "Other\r\n"
    "Comment:\r\n"
)


def test_semeval_reader_on_a_made_up_file(tmp_path, monkeypatch):
    path = tmp_path / "TEST_FILE_FULL.TXT"
    path.write_bytes(MADE_UP.encode("utf-8"))
    examples = load_semeval(path)
    assert [e.label for e in examples] == ["Content-Container(e1,e2)", "Cause-Effect(e1,e2)", "Other"]
    assert examples[0].tokens == ("the", "<e1>", "kettle", "</e1>", "was", "left", "inside", "the", "old",
                                  "<e2>", "garden", "shed", "</e2>", ".")
    assert examples[1].tokens == ("a", "<e1>", "spark", "</e1>", "from", "the", "wire", "caused", "the",
                                  "<e2>", "fire", "</e2>", ",", "said", "o'neil", ".")
    assert "well-known" in examples[2].tokens
    assert all(e.evidence == -1 and e.distractors == () for e in examples)
    assert load_semeval(path, lowercase=False)[0].tokens[0] == "The"
    # the pair of files, from a folder given directly or by the environment variable
    (tmp_path / "TRAIN_FILE.TXT").write_text(MADE_UP.replace("\r\n", "\n").replace("800", "1"), encoding="utf-8")
    train, test = load_semeval_splits(tmp_path)
    assert len(train) == len(test) == 3 and train[0].tokens == test[0].tokens
    monkeypatch.setenv(SEMEVAL_ENV_VAR, str(tmp_path))
    assert load_semeval_splits()[1] == test
    vocab = relation_vocab(train)
    tensors = relation_tensors(test, vocab)
    assert tensors.evidence.tolist() == [-1, -1, -1] and tensors.labels.tolist() == [4, 0, 18]


def test_semeval_reader_names_missing_and_malformed_files(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere" / "TRAIN_FILE.TXT"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        load_semeval(missing)
    monkeypatch.delenv(SEMEVAL_ENV_VAR, raising=False)
    with pytest.raises(FileNotFoundError, match=SEMEVAL_ENV_VAR):
        load_semeval_splits()
    bad_label = tmp_path / "bad_label.txt"
    bad_label.write_text(MADE_UP.replace("Cause-Effect(e1,e2)", "Cause-Effekt(e1,e2)"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad_label\.txt, line 6: expected a label"):
        load_semeval(bad_label)
    bad_markers = tmp_path / "bad_markers.txt"
    bad_markers.write_text(MADE_UP.replace("<e2>fire</e2>", "fire"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad_markers\.txt, line 5: expected each entity marker once"):
        load_semeval(bad_markers)
    not_semeval = tmp_path / "notes.txt"
    not_semeval.write_text("some notes\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"notes\.txt, line 1: expected a sentence line"):
        load_semeval(not_semeval)


def test_tensors_pad_and_name_bad_labels():
    examples = [RelationExample(("a", "<e1>", "x", "</e1>", "and", "<e2>", "y", "</e2>", "."), "Other", 4),
                RelationExample(("<e1>", "x", "</e1>", "has", "<e2>", "y", "</e2>"), "Component-Whole(e2,e1)", 3)]
    vocab = relation_vocab(examples)
    t = relation_tensors(examples, vocab)
    assert t.tokens.shape == (2, 9) and t.lengths.tolist() == [9, 7] and t.labels.tolist() == [18, 3]
    assert vocab.pad == 0 and t.tokens[1, 7:].tolist() == [0, 0] and t.evidence.tolist() == [4, 3]
    with pytest.raises(ValueError, match="expected labels from LABELS"):
        relation_tensors([RelationExample(examples[0].tokens, "Cause")], vocab)


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
    history = train_classifier(model, (t.tokens, t.lengths), t.labels, steps=150, batch_size=32, lr=0.02,
                               progress=False)
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
    with pytest.raises(ValueError, match=r"lengths must have shape \(2,\)"):
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
