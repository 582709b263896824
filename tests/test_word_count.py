"""tools.word_count: the prose length of each notebook, as the chapters' length aim counts it."""

from __future__ import annotations

import nbformat

from tools import word_count


def test_counts_the_words_of_markdown_cells_only(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A title\n\nThe weights $\\alpha_i$ sum to one."),
                nbformat.v4.new_code_cell("print('these words are code, not prose')"),
                nbformat.v4.new_markdown_cell(":::{exercise}\n:label: x\n\nTwo words.\n:::")]
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    assert word_count.notebook_words(path) == 3 + 6 + 6  # title; sentence with its maths; directive lines too


def test_main_lists_every_notebook_and_fails_above_the_limit(tmp_path, monkeypatch, capsys):
    short, long = tmp_path / "short.ipynb", tmp_path / "long.ipynb"
    for path, words in ((short, 10), (long, 50)):
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("word " * words)]), path)
    monkeypatch.setattr(word_count, "ROOT", tmp_path)
    monkeypatch.setattr(word_count, "notebooks", lambda: [short, long])
    assert word_count.main(["--limit", "40"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["    50  long.ipynb  over the limit", "    10  short.ipynb", "    60  in all, 2 notebooks"]
    assert word_count.main(["--limit", "50"]) == 0


def test_every_chapter_is_within_the_length_aim():
    """Each notebook's prose is at most word_count.LIMIT (4,500) words: a chapter a reader finishes."""
    over = {p.name: n for p in word_count.notebooks() if (n := word_count.notebook_words(p)) > word_count.LIMIT}
    assert not over, f"chapters over {word_count.LIMIT:,} words (make words): {over}"
