"""Hierarchical attention networks and the generated reviews (attn_utils.han)."""

from __future__ import annotations

import collections

import pytest
import torch

from attn_utils.classify import accuracy, train_classifier
from attn_utils.han import (
    MAX_WORDS,
    MIN_WORDS,
    NEGATION,
    NEGATIVE_WORDS,
    POSITIVE_WORDS,
    VERDICT_CUES,
    FlatDocumentClassifier,
    HierarchicalAttentionNetwork,
    display_weights,
    documents_to_tensors,
    make_review_data,
    make_reviews,
    pool_words,
    review_label,
    review_vocab,
)

# ----------------------------------------------------------------------------------------------
# The generator
# ----------------------------------------------------------------------------------------------


def _opens_with_cue(sentence):
    text = " ".join(sentence) + " "
    return any(text.startswith(" ".join(cue) + " ") for cue in VERDICT_CUES)


def test_same_seed_same_reviews_and_another_seed_others():
    a, b, c = make_reviews(50, seed=3), make_reviews(50, seed=3), make_reviews(50, seed=4)
    assert a == b
    assert [r.sentences for r in a] != [r.sentences for r in c]


def test_sizes_balance_and_positions():
    reviews = make_reviews(2000, seed=0)
    assert all(4 <= len(r.sentences) <= 8 for r in reviews)
    assert all(MIN_WORDS <= len(s) <= MAX_WORDS for r in reviews for s in r.sentences)
    assert {len(r.sentences) for r in reviews} == set(range(4, 9))
    labels = collections.Counter(r.label for r in reviews)
    assert abs(labels[0] - labels[1]) < 150
    positions = collections.Counter(r.evidence for r in reviews)
    assert set(positions) == set(range(8))  # the verdict can be anywhere, the last sentence of 8 included
    assert all(0 <= r.evidence < len(r.sentences) for r in reviews)


def test_the_evidence_sentence_is_the_only_verdict_and_its_rule_gives_the_label():
    """The rule written out independently: the sentence that opens with a cue, its opinion word, a
    preceding 'not' flips it."""
    for r in make_reviews(1000, seed=1):
        verdicts = [i for i, s in enumerate(r.sentences) if _opens_with_cue(s)]
        assert verdicts == [r.evidence]
        verdict = r.sentences[r.evidence]
        word = verdict[r.evidence_word]
        assert word in POSITIVE_WORDS or word in NEGATIVE_WORDS
        assert sum(w in POSITIVE_WORDS or w in NEGATIVE_WORDS for w in verdict) == 1
        expected = 1 if (word in POSITIVE_WORDS) != (NEGATION in verdict[:r.evidence_word]) else 0
        assert r.label == expected == review_label(r.sentences)


def test_changing_the_verdict_changes_the_label_and_changing_a_filler_never_does():
    reviews = make_reviews(400, seed=2)
    fillers = [s for r in reviews for i, s in enumerate(r.sentences) if i != r.evidence]
    flipped_by_negation = 0
    for n, r in enumerate(reviews):
        other = next(o for o in reviews[n + 1:] + reviews[:n] if o.label != r.label)
        swapped = [list(s) for s in r.sentences]
        swapped[r.evidence] = other.sentences[other.evidence]
        assert review_label(swapped) == other.label != r.label
        for i in range(len(r.sentences)):  # every filler replaced by a filler of another review
            if i != r.evidence:
                changed = [list(s) for s in r.sentences]
                changed[i] = fillers[(7 * n + i) % len(fillers)]
                assert review_label(changed) == r.label
        verdict = list(r.sentences[r.evidence])
        if NEGATION in verdict:
            verdict.remove(NEGATION)
        else:
            verdict.insert(r.evidence_word, NEGATION)
        negated = [list(s) for s in r.sentences]
        negated[r.evidence] = verdict
        flipped_by_negation += review_label(negated) != r.label
    assert flipped_by_negation == len(reviews)


def test_fillers_carry_opinion_words_that_tell_nothing():
    reviews = make_reviews(4000, seed=5)
    opinion = set(POSITIVE_WORDS) | set(NEGATIVE_WORDS)
    def fillers(r):
        return [w for i, s in enumerate(r.sentences) if i != r.evidence for w in s]

    with_opinion = [r for r in reviews if any(w in opinion for w in fillers(r))]
    assert len(with_opinion) > 0.8 * len(reviews)
    # the verdict's opinion word alone, or the sign of all opinion words, says nothing about the label
    positive_verdict_word = [r.label for r in reviews if r.sentences[r.evidence][r.evidence_word] in POSITIVE_WORDS]
    assert 0.45 < sum(positive_verdict_word) / len(positive_verdict_word) < 0.55
    majority = [r.label == (sum(w in POSITIVE_WORDS for s in r.sentences for w in s)
                            > sum(w in NEGATIVE_WORDS for s in r.sentences for w in s)) for r in reviews]
    assert 0.45 < sum(majority) / len(majority) < 0.55
    cues_elsewhere = sum(any(w in ("overall", "balance") for w in fillers(r)) for r in reviews)
    assert cues_elsewhere > 0.1 * len(reviews)  # cue words occur in fillers too, just not at their start


def test_bad_generator_arguments_and_labels_without_a_verdict_are_named():
    with pytest.raises(ValueError, match="min_sentences <= max_sentences"):
        make_reviews(5, min_sentences=6, max_sentences=4)
    with pytest.raises(ValueError, match="exactly one sentence that opens with a verdict cue, found 0"):
        review_label([["the", "film", "was", "good"]])
    with pytest.raises(ValueError, match="found 2"):
        review_label([["overall", "it", "was", "good"], ["on", "balance", "it", "was", "bad"]])


def test_documents_to_tensors_pads_and_round_trips():
    reviews = make_reviews(20, seed=6)
    vocab = review_vocab(reviews)
    assert vocab.pad == 0
    ids, sentence_lens, doc_lens = documents_to_tensors(reviews, vocab, max_sentences=9, max_words=13)
    assert ids.shape == (20, 9, 13) and sentence_lens.shape == (20, 9) and doc_lens.shape == (20,)
    for n, r in enumerate(reviews):
        assert doc_lens[n] == len(r.sentences)
        for i in range(9):
            if i < len(r.sentences):
                assert sentence_lens[n, i] == len(r.sentences[i])
                assert vocab.to_tokens(ids[n, i, :len(r.sentences[i])]) == r.sentences[i]
                assert (ids[n, i, len(r.sentences[i]):] == vocab.pad).all()
            else:
                assert sentence_lens[n, i] == 0 and (ids[n, i] == vocab.pad).all()
    with pytest.raises(ValueError, match="room for 8 sentences"):
        documents_to_tensors(reviews, vocab, max_sentences=3)


def test_review_data_splits():
    data = make_review_data(60, 20, 30, seed=0)
    assert (len(data.train), len(data.val), len(data.test)) == (60, 20, 30)
    assert data.test.inputs[0].shape == (30, 8, 12)
    assert torch.equal(data.train.labels, torch.tensor([r.label for r in data.train.reviews]))
    assert torch.equal(data.test.evidence_word, torch.tensor([r.evidence_word for r in data.test.reviews]))


# ----------------------------------------------------------------------------------------------
# The models
# ----------------------------------------------------------------------------------------------


def _batch(seed=0):
    """3 documents of 4, 2 and 3 sentences, padded to 5 sentences of 6 words; ids from 2..19."""
    g = torch.Generator().manual_seed(seed)
    sentence_lens = torch.tensor([[6, 2, 4, 1, 0], [3, 5, 0, 0, 0], [1, 6, 2, 0, 0]])
    doc_lens = torch.tensor([4, 2, 3])
    ids = torch.randint(2, 20, (3, 5, 6), generator=g)
    ids = ids.masked_fill(torch.arange(6) >= sentence_lens.unsqueeze(-1), 0)
    return ids, sentence_lens, doc_lens


def _han(pooling="attention", dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    return HierarchicalAttentionNetwork(20, 5, 4, 3, 6, 3, pooling=pooling).to(dtype)


def _pool_by_hand(H, pooling_module):
    """Yang et al.'s attention on one unpadded sequence H (steps, size): u = tanh(W h + b), softmax(u . u_ctx)."""
    if pooling_module is None:
        alpha = torch.full((H.shape[0],), 1.0 / H.shape[0], dtype=H.dtype)
    else:
        u = torch.tanh(H @ pooling_module.projection.weight.T + pooling_module.projection.bias)
        alpha = torch.softmax(u @ pooling_module.query, dim=0)
    return alpha, alpha @ H


@torch.no_grad()
def _han_by_hand(model, ids, sentence_lens, doc_lens):
    """nn.GRU run sentence by sentence on the unpadded words, then the attention formulas by hand."""
    batch, sentences, words = ids.shape
    logits = []
    word_weights = torch.zeros(batch, sentences, words, dtype=torch.float64)
    sentence_weights = torch.zeros(batch, sentences, dtype=torch.float64)
    for n in range(batch):
        vectors = []
        for i in range(int(doc_lens[n])):
            x = model.embedding.weight[ids[n, i, :int(sentence_lens[n, i])]]  # (words, E): no padding at all
            h, _ = model.word_encoder(x.unsqueeze(0))  # (1, words, 2h)
            alpha, s = _pool_by_hand(h[0], model.word_attention)
            word_weights[n, i, :len(alpha)] = alpha
            vectors.append(s)
        h, _ = model.sentence_encoder(torch.stack(vectors).unsqueeze(0))  # (1, sentences, 2h)
        alpha, v = _pool_by_hand(h[0], model.sentence_attention)
        sentence_weights[n, :len(alpha)] = alpha
        logits.append(model.classifier(v))
    return torch.stack(logits), word_weights, sentence_weights


@pytest.mark.parametrize("pooling", ["attention", "mean"])
def test_han_matches_a_sentence_by_sentence_reference(pooling):
    model = _han(pooling)
    ids, sentence_lens, doc_lens = _batch()
    logits = model(ids, sentence_lens, doc_lens)
    want_logits, want_words, want_sentences = _han_by_hand(model, ids, sentence_lens, doc_lens)
    assert logits.shape == (3, 3)
    assert model.word_attention_weights.shape == (3, 5, 6) and model.attention_weights.shape == (3, 5)
    torch.testing.assert_close(logits, want_logits)
    torch.testing.assert_close(model.word_attention_weights, want_words)
    torch.testing.assert_close(model.attention_weights, want_sentences)


def test_padding_gets_weight_exactly_zero_and_its_values_change_nothing():
    model = _han()
    ids, sentence_lens, doc_lens = _batch()
    logits = model(ids, sentence_lens, doc_lens)
    words, sentences = model.word_attention_weights.clone(), model.attention_weights.clone()
    real_words = (torch.arange(6) < sentence_lens.unsqueeze(-1)) & (torch.arange(5) < doc_lens[:, None]).unsqueeze(-1)
    assert (words[~real_words] == 0).all() and (sentences[torch.arange(5) >= doc_lens[:, None]] == 0).all()
    torch.testing.assert_close(words.sum(-1), (sentence_lens > 0).to(torch.float64))
    torch.testing.assert_close(sentences.sum(-1), torch.ones(3, dtype=torch.float64))
    noisy = torch.where(real_words, ids, torch.randint(1, 20, ids.shape))  # any token where padding was
    noisy_lens = torch.where(torch.arange(5) < doc_lens[:, None], sentence_lens, 6)  # lengths past the end ignored
    torch.testing.assert_close(model(noisy, noisy_lens, doc_lens), logits, rtol=0, atol=1e-12)
    torch.testing.assert_close(model.word_attention_weights, words, rtol=0, atol=1e-12)
    torch.testing.assert_close(model.attention_weights, sentences, rtol=0, atol=1e-12)


def test_a_document_padded_with_sentences_equals_the_document_alone():
    model = _han()
    ids, sentence_lens, doc_lens = _batch()
    batch_logits = model(ids, sentence_lens, doc_lens)
    batch_words = model.word_attention_weights
    # document 1 (2 sentences of 3 and 5 words), alone and unpadded
    alone = model(ids[1:2, :2, :5], sentence_lens[1:2, :2], doc_lens[1:2])
    torch.testing.assert_close(alone, batch_logits[1:2])
    torch.testing.assert_close(model.word_attention_weights[0], batch_words[1, :2, :5])


def test_lengths_default_to_the_padding_and_empty_documents_give_no_nan():
    model = _han()
    ids, sentence_lens, doc_lens = _batch()
    torch.testing.assert_close(model(ids), model(ids, sentence_lens, doc_lens))
    empty = torch.zeros(2, 3, 4, dtype=torch.long)
    logits = model(empty)
    assert torch.isfinite(logits).all()
    torch.testing.assert_close(logits, model.classifier.bias.expand(2, 3))  # v = 0: only the bias is left
    assert (model.attention_weights == 0).all() and (model.word_attention_weights == 0).all()


def test_flat_classifier_matches_one_gru_over_the_concatenated_words():
    torch.manual_seed(1)
    for pooling in ("mean", "attention"):
        model = FlatDocumentClassifier(20, 5, 4, 6, 3, pooling=pooling).double()
        ids, sentence_lens, doc_lens = _batch()
        logits = model(ids, sentence_lens, doc_lens)
        assert model.attention_weights.shape == (3, 30)
        with torch.no_grad():
            for n in range(3):
                words = torch.cat([ids[n, i, :int(sentence_lens[n, i])] for i in range(int(doc_lens[n]))])
                h, _ = model.encoder(model.embedding.weight[words].unsqueeze(0))  # (1, words, 2h)
                alpha, v = _pool_by_hand(h[0], model.attention)
                torch.testing.assert_close(logits[n], model.classifier(v))
                torch.testing.assert_close(model.attention_weights[n, :len(words)], alpha)
                assert (model.attention_weights[n, len(words):] == 0).all()


def test_pool_words_and_display_weights():
    torch.manual_seed(2)
    H = torch.randn(2, 3, 4, 5)
    lens = torch.tensor([[4, 1, 0], [2, 0, 0]])
    s, w = pool_words(None, H, lens)
    torch.testing.assert_close(s[0, 0], H[0, 0].mean(0))
    torch.testing.assert_close(s[1, 0], H[1, 0, :2].mean(0))
    assert (s[0, 2] == 0).all() and (w[0, 2] == 0).all()
    shown = display_weights(torch.tensor([0.64, 0.36]), torch.tensor([[0.5, 0.5], [1.0, 0.0]]))
    torch.testing.assert_close(shown, torch.tensor([[0.4, 0.4], [0.6, 0.0]]))


def test_bad_input_is_named():
    model = _han()
    ids, sentence_lens, doc_lens = _batch()
    with pytest.raises(ValueError, match=r"token ids of shape \(batch, sentences, words\), got Tensor \(3, 30\)"):
        model(ids.reshape(3, 30))
    with pytest.raises(ValueError, match="integer token ids"):
        model(ids.float())
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 20\), got 0..25"):
        model(ids.masked_fill(ids == ids.max(), 25))
    with pytest.raises(ValueError, match=r"sentence_lens as integers of shape \(3, 5\).*got Tensor \(3, 4\)"):
        model(ids, sentence_lens[:, :4], doc_lens)
    with pytest.raises(ValueError, match=r"sentence_lens must lie in \[0, 6\], got 0..7"):
        model(ids, sentence_lens.masked_fill(sentence_lens == 6, 7), doc_lens)
    with pytest.raises(ValueError, match=r"doc_lens must lie in \[0, 5\], got 2..6"):
        model(ids, sentence_lens, torch.tensor([6, 2, 3]))
    with pytest.raises(ValueError, match="pooling must be one of"):
        HierarchicalAttentionNetwork(20, 5, 4, 3, 6, 3, pooling="max")
    with pytest.raises(ValueError, match="word weights"):
        display_weights(torch.ones(2, 3), torch.ones(2, 4, 5))


def test_overfits_32_documents(one_thread):
    data = make_review_data(32, 8, 8, seed=0)
    torch.manual_seed(0)
    model = HierarchicalAttentionNetwork(len(data.vocab), 16, 16, 16, 16, 2)
    train_classifier(model, data.train.inputs, data.train.labels, steps=60, batch_size=32, lr=2e-2, progress=False)
    assert accuracy(model, data.train.inputs, data.train.labels) == 1.0


def test_any_device(any_device):
    model = _han(dtype=torch.float32)
    ids, sentence_lens, doc_lens = _batch()
    want = model(ids, sentence_lens, doc_lens)
    want_words = model.word_attention_weights
    model.to(any_device)
    got = model(ids.to(any_device), sentence_lens.to(any_device), doc_lens.to(any_device))
    assert got.device.type == any_device.type and model.attention_weights.device.type == any_device.type
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(model.word_attention_weights.cpu(), want_words, rtol=1e-4, atol=1e-5)
    flat = FlatDocumentClassifier(20, 5, 4, 6, 3, pooling="attention").to(any_device)
    assert flat(ids.to(any_device)).device.type == any_device.type
