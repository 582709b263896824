"""A wrong Tatoeba file fails early, naming the file and what to do: byte-order mark, encoding, malformed
lines, swapped columns, a local ``fra-eng.zip`` that is not d2l's. Every fixture is a tiny file in tmp_path."""

from __future__ import annotations

import io
import zipfile

import pytest
from data_helpers import synthetic_fra_text, write_fra

from attn_utils.data import DATA_ENV_VAR, load_tatoeba, load_translation_data, parse_pairs
from attn_utils.data.cache import sha1_of
from attn_utils.data.tatoeba import check_column_order, french_share

SMALL = "Go.\tVa !\nHi.\tSalut.\nHe is there.\tIl est là.\nRun!\tCours !\n"


@pytest.fixture(autouse=True)
def no_environment(monkeypatch):
    monkeypatch.delenv(DATA_ENV_VAR, raising=False)


def _write(folder, data: bytes, name: str = "fra.txt"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path):
    assert parse_pairs("\ufeff" + SMALL).src[0] == ["go", "."]
    path = _write(tmp_path, ("\ufeff" + SMALL).encode("utf-8"))
    corpus = load_tatoeba(path, verbose=False)
    assert corpus.src[0] == ["go", "."] and len(corpus) == 4


@pytest.mark.parametrize("data, match", [
    (SMALL.encode("latin-1"), r"fra.txt: line 3 is not UTF-8 \(byte b'\\xe0' .*Latin-1 or Windows-1252\? "
                              r"Save it as UTF-8"),
    (SMALL.encode("utf-16"), r"fra.txt: line 1 is not UTF-8 .*looks UTF-16: save it as UTF-8"),
    (SMALL.encode("utf-8")[:SMALL.encode("utf-8").index("à".encode()) + 1],
     r"fra.txt: line 3 is not UTF-8 .*ends in the middle of a character, so it was cut short"),
])
def test_undecodable_bytes_name_the_file_and_line(tmp_path, data, match):
    path = _write(tmp_path, data)
    with pytest.raises(ValueError, match=match):
        load_tatoeba(path, verbose=False)


def test_the_first_malformed_line_is_reported(tmp_path):
    corpus = parse_pairs("Go.\tVa !\n\nno tab here\nA\tB\tC\tD\n")
    assert corpus.malformed == 2
    assert corpus.first_malformed == "line 3: 'no tab here' (1 tab-separated field(s), expected 2 or 3)"
    # a file of mostly malformed lines fails at once, not later with "cannot fill a test set"
    commas = "".join(line.replace("\t", ",") + "\n" for line in synthetic_fra_text(50).splitlines())
    write_fra(tmp_path, text=commas)
    with pytest.raises(ValueError, match=r"fra.txt: \d+ malformed line\(s\) against 0 pair\(s\), the first at line 1: "
                                         r"'[^']*,[^']*' \(1 tab-separated field\(s\).*English<TAB>French"):
        load_translation_data("tatoeba", data_path=tmp_path, verbose=False)


def test_a_file_cut_short_mid_sentence_loses_and_names_its_last_line(tmp_path):
    cut = SMALL + "I lost my\tJ'ai perdu m"  # a copy interrupted in the middle of a line
    corpus = load_tatoeba(_write(tmp_path, cut.encode()), verbose=False)
    assert len(corpus) == 4 and corpus.tgt[-1] == ["cours", "!"] and corpus.malformed == 1
    assert corpus.first_malformed == ("line 5: \"I lost my\\tJ'ai perdu m\" (no line break after it: the file was cut "
                                      "short here; copy or download it again)")
    # an earlier malformed line stays the first one shown; every line ending with a break is whole
    corpus = parse_pairs("no tab\n" + cut, ends_with_newline=True)
    assert corpus.malformed == 2 and corpus.first_malformed.startswith("line 1: 'no tab'")
    assert parse_pairs(SMALL + "  ", ends_with_newline=True).malformed == 0
    assert len(parse_pairs(cut)) == 5  # the bundled corpora are generated text: no such rule


def test_swapped_columns_are_detected(tmp_path):
    lines = synthetic_fra_text(100).splitlines()
    swapped = "".join("\t".join(line.split("\t")[:2][::-1]) + "\n" for line in lines)
    write_fra(tmp_path, text=swapped)
    with pytest.raises(ValueError, match=r"fra.txt: the columns look swapped: \d+% of the first column's .*look "
                                         r"French against \d+% .*English<TAB>French.*check_columns=False"):
        load_tatoeba(tmp_path, verbose=False)
    assert len(load_tatoeba(tmp_path, verbose=False, check_columns=False)) == 130  # switched off: read as it is
    # the right order passes; so do a few French names or words in English sentences
    corpus = load_tatoeba(write_fra(tmp_path / "right", num_pairs=100), verbose=False)
    assert french_share(corpus.src) == 0.0 and french_share(corpus.tgt) > 0.5
    check_column_order(parse_pairs("Zoé is here.\tZoé est là.\nI like crêpes.\tJ'aime les crêpes.\n"
                                   "Go.\tVa !\nHi.\tSalut.\nRun!\tCours !\n"), "fra.txt")


def _zip_bytes(text: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("fra-eng/fra.txt", text)
    return buffer.getvalue()


def test_a_local_zip_is_checked(tmp_path):
    html = b"<!DOCTYPE html>\n<html><body>Access denied</body></html>\n"
    page = _write(tmp_path / "page", html, "fra-eng.zip")
    for source in (page, page.parent):  # the file itself or the folder holding it
        with pytest.raises(ValueError, match=r"fra-eng.zip is not a zip archive \(it begins b'<!DOCTYPE html>.*an "
                                             r"HTML page\).*Download it again from http"):
            load_translation_data("tatoeba", data_path=source, verbose=False)
    other = _write(tmp_path / "other", html, "pairs.zip")  # another name: not checksummed, still not a zip
    with pytest.raises(ValueError, match="pairs.zip is not a zip archive"):
        load_tatoeba(other, verbose=False)
    mine = _write(tmp_path / "mine", _zip_bytes(synthetic_fra_text(50)), "fra-eng.zip")
    with pytest.raises(ValueError, match=r"fra-eng.zip: checksum mismatch, SHA-1 [0-9a-f]{40} instead of d2l's "
                                         r"94646ad1.*unzip it"):
        load_tatoeba(mine, verbose=False)
    assert len(load_tatoeba(mine, verbose=False, sha1=sha1_of(mine))) == 50 + 13 + 4  # the expected checksum
    renamed = _write(tmp_path / "renamed", mine.read_bytes(), "my-pairs.zip")  # own zips of another name: unchecked
    assert len(load_tatoeba(renamed, verbose=False)) == 50 + 13 + 4
