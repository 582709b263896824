"""Chapter 4 offline: without the Tatoeba pairs it runs on the grammar corpus, under a banner, and skips
the analyses that only the Tatoeba pairs support (the quick budget, as in ``make test``)."""

from __future__ import annotations

from pathlib import Path

import nbformat

from tools.execute_notebooks import run

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "part2_seq2seq" / "04_encoder_decoder.ipynb"
# Run right after the setup cell: every download fails, as on a machine without network.
NO_NETWORK = """import attn_utils.data.cache as download_cache


def no_network(*args, **kwargs):
    raise OSError("no network in this test")


download_cache.fetch = no_network"""


def _printed(cell) -> str:
    return "".join(out.get("text", "") for out in cell.get("outputs", []) if out.get("output_type") == "stream")


def test_chapter_4_without_tatoeba_runs_under_a_banner_and_skips_tatoeba_analyses(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTN_UTILS_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no earlier download either
    monkeypatch.setenv("ATTN_UTILS_QUICK", "1")
    nb = nbformat.read(CHAPTER, as_version=4)
    setup = next(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code")
    nb.cells.insert(setup + 1, nbformat.v4.new_code_cell(NO_NETWORK))
    run(nb, CHAPTER.parent, timeout=600)  # raises on any error in any cell
    printed = [_printed(cell) for cell in nb.cells if cell.cell_type == "code"]
    loading = next(text for text in printed if "OFFLINE" in text)
    assert loading.startswith("=" * 72 + "\nOFFLINE: the Tatoeba pairs are not available\n")
    assert "(could not download " in loading and "no network in this test)" in loading
    assert "\ngrammar: train " in loading
    skipped = [line for text in printed for line in text.splitlines() if line.startswith("Skipped:")]
    assert skipped == [
        "Skipped: the length analysis needs the Tatoeba pairs; this run read the grammar corpus.",
    ]
    figures = sum("image/png" in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", []))
    stored = nbformat.read(CHAPTER, as_version=4)
    stored_figures = sum("image/png" in out.get("data", {}) for cell in stored.cells for out in cell.get("outputs", []))
    assert figures == stored_figures - 1  # the length figure is not drawn
