"""attn_utils.data.semeval: the reader of the SemEval-2010 Task 8 files, on small files in their format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from attn_utils.data.relations import (
    ENTITY_MARKERS,
    LABELS,
    RelationExample,
    relation_tensors,
    relation_type,
    relation_vocab,
)
from attn_utils.data.semeval import SEMEVAL_ENV_VAR, load_semeval, load_semeval_splits

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


# A file in the distribution's format: an id, a tab and the sentence in quotes with its two marked
# nominals; the label; a "Comment:" line, empty or not; a blank line (none after the last example).
OFFICIAL_FORMAT = (
    '1\t"<e1>Smoke</e1> from the <e2>chimney</e2> drifted over the village."\n'
    "Entity-Origin(e1,e2)\n"
    "Comment:\n"
    "\n"
    '2\t"The old <e1>bridge</e1> was described in a 19th-century <e2>travel journal</e2>."\n'
    "Message-Topic(e2,e1)\n"
    "Comment: the journal is the message, the bridge its topic.\n"
    "\n"
    '3\t"A <e1>member of staff</e1> left the <e2>committee</e2> in May."\n'
    "Other\n"
    "Comment:\n"
)


def test_semeval_reader_gives_tokens_labels_and_entity_positions(tmp_path):
    path = tmp_path / "TRAIN_FILE.TXT"
    path.write_text(OFFICIAL_FORMAT, encoding="utf-8")
    examples = load_semeval(path)
    assert [e.tokens for e in examples] == [
        ("<e1>", "smoke", "</e1>", "from", "the", "<e2>", "chimney", "</e2>", "drifted", "over", "the", "village",
         "."),
        ("the", "old", "<e1>", "bridge", "</e1>", "was", "described", "in", "a", "19th-century", "<e2>", "travel",
         "journal", "</e2>", "."),
        ("a", "<e1>", "member", "of", "staff", "</e1>", "left", "the", "<e2>", "committee", "</e2>", "in", "may", "."),
    ]
    assert [e.label for e in examples] == ["Entity-Origin(e1,e2)", "Message-Topic(e2,e1)", "Other"]
    # the positions of <e1>, </e1>, <e2>, </e2>, and the words of each entity between its markers
    positions = [tuple(e.tokens.index(m) for m in ENTITY_MARKERS) for e in examples]
    assert positions == [(0, 2, 5, 7), (2, 4, 10, 13), (1, 5, 8, 10)]
    entities = [(e.tokens[a + 1:b], e.tokens[c + 1:d]) for e, (a, b, c, d) in zip(examples, positions)]
    assert entities == [(("smoke",), ("chimney",)), (("bridge",), ("travel", "journal")),
                        (("member", "of", "staff"), ("committee",))]
    assert all(e.evidence == -1 and e.distractors == () and e.cue_span == (-1, -1) for e in examples)
    assert relation_tensors(examples, relation_vocab(examples)).labels.tolist() == [8, 15, 18]


# ------------------------------------------------------------------ a fixture folder in the official format

FIXTURE = Path(__file__).parent / "fixtures" / "semeval"  # made-up sentences, the distribution's layout
CHAPTER = Path(__file__).parents[1] / "chapters" / "part2_seq2seq" / "07b_relation_classification.ipynb"


def test_the_fixture_is_laid_out_as_the_distributed_files():
    """Blocks of four CRLF-terminated lines: ``<id>\\t"<sentence>"``, the label, ``Comment:...``, a blank line;
    the training file numbers its sentences from 1, the test file from 8001."""
    for name, first in (("TRAIN_FILE.TXT", 1), ("TEST_FILE_FULL.TXT", 8001)):
        raw = (FIXTURE / name).read_bytes().decode("utf-8")
        assert raw.endswith("\r\n\r\n") and "\n" not in raw.replace("\r\n", "")
        blocks = raw.split("\r\n\r\n")[:-1]
        for k, block in enumerate(blocks):
            sentence, label, comment = block.split("\r\n")
            assert re.fullmatch(rf'{first + k}\t"[^"\t]*<e1>[^<]+</e1>[^<]*<e2>[^<]+</e2>[^"\t]*"', sentence), sentence
            assert label in LABELS and comment.startswith("Comment:")


def test_the_reader_on_the_fixture_folder():
    train, test = load_semeval_splits(FIXTURE)
    assert (len(train), len(test)) == (22, 8)
    assert train[0] == RelationExample(("the", "<e1>", "fire", "</e1>", "was", "caused", "by", "a", "faulty", "<e2>",
                                        "cable", "</e2>", "in", "the", "basement", "."), "Cause-Effect(e2,e1)")
    assert train[18].tokens[-4:] == ("through", "o'brien's", "land", ".")  # an apostrophe inside a word
    assert [e.label for e in test] == ["Cause-Effect(e2,e1)", "Component-Whole(e1,e2)", "Content-Container(e1,e2)",
                                       "Instrument-Agency(e1,e2)", "Message-Topic(e1,e2)", "Product-Producer(e1,e2)",
                                       "Other", "Entity-Origin(e1,e2)"]
    assert sum(relation_type(e.label) == "Other" for e in train) == 3
    assert all(e.evidence == -1 for e in train + test)


def test_the_chapters_real_data_cell_runs_on_the_fixture(monkeypatch, capsys):
    """The cell of chapter 7b that trains the three models on the real files, run on the fixture folder
    at the quick budget, after the chapter's setup and import cells."""
    monkeypatch.setenv("ATTN_UTILS_QUICK", "1")
    monkeypatch.setenv(SEMEVAL_ENV_VAR, str(FIXTURE))
    cells = [c for c in json.loads(CHAPTER.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    setup, imports = ("".join(c["source"]) for c in cells[:2])
    real = [c for c in cells if "load_semeval_splits(folder)" in "".join(c["source"])]
    assert len(real) == 1, "chapter 7b has one cell that reads the real files"
    namespace = {}
    exec(setup, namespace)
    exec(imports, namespace)
    exec("".join(real[0]["source"]), namespace)
    printed = capsys.readouterr().out
    assert "SemEval-2010 Task 8: 20 training, 2 validation and 8 test sentences" in printed
    for name in namespace["NAMES"].values():
        assert re.search(rf"{re.escape(name)} +test accuracy \d\.\d{{3}} \(\d\.\d{{3}}–\d\.\d{{3}}\), macro-F1 "
                         r"\(9 relations, direction counted\) \d\.\d{3} ", printed), printed
