"""The bundled corpora's generators: French agreement rules, date formats, valid gold alignments,
and snapshots that regenerate byte for byte."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from attn_utils.data import (
    BUNDLED,
    bundled_text,
    format_date,
    generate_dates,
    generate_grammar,
    iso_date,
    load_bundled,
    tokenize_date,
)
from attn_utils.data.generate import check_snapshots, main, write_snapshots
from attn_utils.data.grammar import COLOUR_ADJECTIVES

ROOT = Path(__file__).resolve().parents[1]
GRAMMAR = generate_grammar(2500, seed=0)
DATES = generate_dates(5000, seed=0)

# Written out by hand (not read from the generator's tables), so a wrong table is caught.
# French noun form → {(gender, plural)}; adjective form → the (gender, plural) it agrees with.
_MS, _FS, _MP, _FP = ("m", False), ("f", False), ("m", True), ("f", True)
FR_NOUN = {**{n: {_MS} for n in ("chat", "chien", "garçon", "lapin", "cheval", "livre", "vélo", "camion",
                                 "gâteau")},
           **{n: {_MP} for n in ("chats", "chiens", "garçons", "lapins", "chevaux", "livres", "vélos", "camions",
                                 "gâteaux")},
           **{n: {_FS} for n in ("fille", "voiture", "maison", "table", "pomme", "fleur", "tasse")},
           **{n: {_FP} for n in ("filles", "voitures", "maisons", "tables", "pommes", "fleurs", "tasses")},
           "souris": {_FS, _FP}}
FR_ADJ = {**{a: {_MS} for a in ("petit", "grand", "joli", "noir", "vert", "bleu", "blanc")},
          **{a: {_FS} for a in ("petite", "grande", "jolie", "noire", "verte", "bleue", "blanche", "grise")},
          **{a: {_MP} for a in ("petits", "grands", "jolis", "noirs", "verts", "bleus", "blancs")},
          **{a: {_FP} for a in ("petites", "grandes", "jolies", "noires", "vertes", "bleues", "blanches", "grises")},
          "rouge": {_MS, _FS}, "rouges": {_MP, _FP}, "gris": {_MS, _MP}}
FR_DET = {"le": {("m", False)}, "un": {("m", False)}, "mon": {("m", False)}, "ce": {("m", False)},
          "la": {("f", False)}, "une": {("f", False)}, "ma": {("f", False)}, "cette": {("f", False)},
          **{d: {("m", True), ("f", True)} for d in ("les", "des", "mes", "ces")},
          "de": {("m", False), ("f", False), ("m", True), ("f", True)}}
FR_VERB_PLURAL = {**{v: False for v in ("voit", "mange", "regarde", "trouve", "pousse", "porte", "veut", "cherche",
                                        "est", "n'est")},
                  **{v: True for v in ("voient", "mangent", "regardent", "trouvent", "poussent", "portent", "veulent",
                                       "cherchent", "sont")}}
ENGLISH_WITHOUT_FRENCH = {"does", "do"}


def _noun_phrases(fr: list[str]):
    """French noun phrases as lists of (position, token): a determiner up to the next verb, pas or '.'."""
    phrases, current = [], None
    for j, token in enumerate(fr):
        if token in FR_DET:
            current = [(j, token)]
            phrases.append(current)
        elif token in FR_VERB_PLURAL or token in {"ne", "pas", "."}:
            current = None
        elif current is not None:
            current.append((j, token))
    return phrases


def test_known_sentences_of_the_grammar():
    en, fr, links = GRAMMAR[2]
    assert " ".join(en) == "these white horses are blue ."
    assert " ".join(fr) == "ces chevaux blancs sont bleus ."
    assert links == [(0, 0), (1, 2), (2, 1), (3, 3), (4, 4), (5, 5)]  # white↔blancs, horses↔chevaux swap
    en, fr, links = GRAMMAR[3]
    assert " ".join(en) == "this grey girl does not find a truck ."
    assert " ".join(fr) == "cette fille grise ne trouve pas de camion ."
    assert (4, 3) in links and (4, 5) in links  # not ↔ ne, not ↔ pas
    assert not any(i == 3 for i, _ in links)  # "does" has no French counterpart


def test_grammar_french_agrees_in_gender_and_number():
    for _, fr, _ in GRAMMAR:
        phrases = _noun_phrases(fr)
        assert phrases, fr
        agreements = []
        for phrase in phrases:
            assert sum(t in FR_NOUN for _, t in phrase) == 1, (fr, phrase)
            agreement = {("m", False), ("f", False), ("m", True), ("f", True)}
            for _, token in phrase:  # determiner, adjectives and noun share one gender and number
                agreement &= FR_DET.get(token) or FR_ADJ.get(token) or FR_NOUN.get(token) or set()
            assert agreement, f"{[t for _, t in phrase]} do not agree in {' '.join(fr)}"
            agreements.append(agreement)
        subject = agreements[0]
        verb = next(t for t in fr if t in FR_VERB_PLURAL)
        assert {plural for _, plural in subject} == {FR_VERB_PLURAL[verb]}, " ".join(fr)
        if verb in ("est", "n'est", "sont"):  # the predicate adjective agrees with the subject
            assert subject & FR_ADJ[fr[-2]], " ".join(fr)


def test_grammar_word_order_and_negation():
    colours = {c[0] for c in COLOUR_ADJECTIVES}
    seen_reordering = seen_negation = 0
    for en, fr, links in GRAMMAR:
        fr_of = {}
        for i, j in links:
            fr_of.setdefault(i, []).append(j)
        for i, token in enumerate(en):
            if token in colours and en[i + 1] != ".":  # English colour noun → French noun colour
                assert fr_of[i] == [fr_of[i + 1][0] + 1], " ".join(en)
                seen_reordering += 1
        if "not" in en:
            seen_negation += 1
            assert "pas" in fr and ("ne" in fr or "n'est" in fr)
            assert fr.index("pas") > fr.index("ne" if "ne" in fr else "n'est")
        else:
            assert "pas" not in fr and "ne" not in fr
        if "de" in fr:  # only an indefinite object under negation becomes "de"
            assert fr[fr.index("de") - 1] == "pas"
    assert seen_reordering > 500 and seen_negation > 500


def test_grammar_alignments_index_valid_tokens():
    for en, fr, links in GRAMMAR:
        assert links == sorted(set(links))
        assert all(0 <= i < len(en) and 0 <= j < len(fr) for i, j in links)
        assert {j for _, j in links} == set(range(len(fr))), "every French word has a link"
        unlinked = {en[i] for i in set(range(len(en))) - {i for i, _ in links}}
        assert unlinked <= ENGLISH_WITHOUT_FRENCH


def test_grammar_sentences_are_distinct_and_seeded():
    assert len({" ".join(en) for en, _, _ in GRAMMAR}) == len(GRAMMAR)
    assert generate_grammar(50, seed=0) == GRAMMAR[:50]
    assert generate_grammar(50, seed=1) != GRAMMAR[:50]


@pytest.mark.parametrize("fmt, source", [
    ("month_day_year", "march 3 , 2021"),
    ("day_month_year", "3 march 2021"),
    ("short_month", "mar 3 , 2021"),
    ("slashes", "03 / 03 / 21"),
    ("weekday", "wednesday , march 3 , 2021"),
    ("ordinal", "the 3rd of march , 2021"),
])
def test_date_formats(fmt, source):
    src, tgt, links = format_date(datetime.date(2021, 3, 3), fmt)
    assert " ".join(src) == source
    assert tgt == ["2021", "-", "03", "-", "03"] and iso_date(tgt) == "2021-03-03"
    by_target = {j: src[i] for i, j in links}
    assert sorted(by_target) == [0, 2, 4]  # year, month, day; the "-" have no source word
    assert by_target[0] in ("2021", "21") and by_target[2] in ("march", "mar", "03")
    assert by_target[4] in ("3", "03", "3rd")


def test_dates_are_valid_and_their_links_carry_the_values():
    months = {"january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
              "august": 8, "september": 9, "october": 10, "november": 11, "december": 12}
    months |= {m[:3]: n for m, n in months.items()}
    for src, tgt, links in DATES:
        date = datetime.date.fromisoformat(iso_date(tgt))
        assert datetime.date(1950, 1, 1) <= date <= datetime.date(2049, 12, 31)
        assert all(0 <= i < len(src) and 0 <= j < len(tgt) for i, j in links)
        by_target = {j: src[i] for i, j in links}
        year = by_target[0]
        century = 0 if len(year) == 4 else 1900 if int(year) >= 50 else 2000
        assert century + int(year) == date.year
        assert (months.get(by_target[2]) or int(by_target[2])) == date.month
        assert int(by_target[4].rstrip("stndrh")) == date.day
        weekday = [t for t in src if t.endswith("day") and not t[0].isdigit()]
        assert not weekday or weekday[0] == date.strftime("%A").lower()
    assert len({" ".join(src) for src, _, _ in DATES}) > 4900


def test_tokenize_date_matches_the_corpus():
    assert tokenize_date("March 3, 2021") == ["march", "3", ",", "2021"]
    assert tokenize_date("03/03/21") == ["03", "/", "03", "/", "21"]
    assert tokenize_date("Wednesday, March 3, 2021") == ["wednesday", ",", "march", "3", ",", "2021"]


def test_snapshots_regenerate_byte_for_byte(tmp_path):
    written = write_snapshots(tmp_path)
    assert [p.name for p in written] == [spec.filename for spec in BUNDLED.values()]
    for path in written:
        committed = ROOT / "data" / path.name
        assert committed.read_bytes() == path.read_bytes(), f"{path.name}: run python -m attn_utils.data.generate"
        assert committed.stat().st_size < 300_000
    assert check_snapshots(ROOT / "data") == []
    assert main(["--check"]) == 0
    (tmp_path / written[0].name).write_text("changed\n", encoding="utf-8")
    assert check_snapshots(tmp_path) == [written[0].name]
    assert main(["--check", "--out", str(tmp_path)]) == 1


def test_bundled_corpora_read_back_as_generated():
    grammar = load_bundled("grammar")
    assert len(grammar) == 2500 and grammar.malformed == 0
    assert grammar.src == [en for en, _, _ in GRAMMAR] and grammar.tgt == [fr for _, fr, _ in GRAMMAR]
    assert grammar.alignments == [links for _, _, links in GRAMMAR]
    dates = load_bundled("dates")
    assert (dates.src[0], dates.tgt[0], dates.alignments[0]) == DATES[0]
    small = load_bundled("grammar", num_examples=30, seed=0)  # generated in memory
    assert small.src == grammar.src[:30]
    assert bundled_text("dates", 2).splitlines()[0] == "02 / 15 / 19\t2019 - 02 - 15\t0-2 2-4 4-0"
    with pytest.raises(ValueError, match="expected one of"):
        load_bundled("klingon")


def test_sizes_of_the_generated_corpora_are_counts():
    """Before: generate_grammar(-3) and generate_dates(-3) returned [], generate_dates(2.5) failed in range()'s
    words, and load_bundled('grammar', num_examples=0) an empty corpus that failed only when split."""
    for generate in (generate_grammar, generate_dates):
        for bad in (-3, 2.5, True):
            with pytest.raises(ValueError, match=rf"num_examples must be a non-negative integer, got {bad!r}"):
                generate(bad)
        assert generate(0) == [] and len(generate(3)) == 3
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match=rf"num_examples must be a positive integer or None \(the snapshot's "
                                             rf"size\), got {bad!r}"):
            load_bundled("grammar", num_examples=bad)
        with pytest.raises(ValueError, match=rf"num_examples must be a positive integer .* got {bad!r}"):
            bundled_text("dates", num_examples=bad)
    assert len(load_bundled("dates", num_examples=5)) == 5
