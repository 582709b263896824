"""attn_utils.data.relations: the generated SemEval-style corpus, its labels and its tensors."""

from __future__ import annotations

import pytest

from attn_utils.data.relations import (
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
    RelationExample,
    cue_words,
    make_relation_corpus,
    relation_tensors,
    relation_type,
    relation_vocab,
)
from attn_utils.data.semeval import check_markers

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


# ------------------------------------------------------------------ tensors

def test_tensors_pad_and_name_bad_labels():
    examples = [RelationExample(("a", "<e1>", "x", "</e1>", "and", "<e2>", "y", "</e2>", "."), "Other", 4),
                RelationExample(("<e1>", "x", "</e1>", "has", "<e2>", "y", "</e2>"), "Component-Whole(e2,e1)", 3)]
    vocab = relation_vocab(examples)
    t = relation_tensors(examples, vocab)
    assert t.tokens.shape == (2, 9) and t.lengths.tolist() == [9, 7] and t.labels.tolist() == [18, 3]
    assert vocab.pad == 0 and t.tokens[1, 7:].tolist() == [0, 0] and t.evidence.tolist() == [4, 3]
    with pytest.raises(ValueError, match="expected labels from LABELS"):
        relation_tensors([RelationExample(examples[0].tokens, "Cause")], vocab)


def test_relation_split_sizes_and_distractors_must_be_integers():
    """Before: num_train=2.5 failed in Python's words, num_train=True made one sentence, distractors=True one
    distractor clause (True in (1, 2, 3))."""
    for bad in (2.5, True):
        with pytest.raises(ValueError, match=rf"num_train must be a non-negative integer, got {bad!r}"):
            make_relation_corpus(num_train=bad, num_val=1, num_test=1)
    with pytest.raises(ValueError, match="distractors must be 1, 2 or 3 .* got True"):
        make_relation_corpus(num_train=2, num_val=1, num_test=1, distractors=True)
    assert len(make_relation_corpus(num_train=2, num_val=1, num_test=1).train) == 2
