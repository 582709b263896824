"""Helpers of the data tests: a tiny synthetic ``fra.txt`` (every code path runs without the real file) and
canvas regions of the digit canvases."""

from __future__ import annotations

from attn_utils.canvas import REGION
from attn_utils.data import generate_grammar

# Lines the parser must skip and count: no tab, empty English, empty French, four fields.
MALFORMED_LINES = ["no tab on this line", "\tPersonne.", "Nobody.\t", "a\tb\tc\td"]
SPECIAL_LINES = [
    "Hello!\u00a0\tBonjour\u202f!\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (x) & #2 (y)",  # attribution column
    "It\u2019s OK.\tC\u2019est bon.",  # typographic apostrophes
    "Go back!\tRecule\u2009!",  # thin space
    "What?!\tQuoi ?!",
]


def synthetic_fra_text(num_pairs: int = 300) -> str:
    """Tatoeba-like lines (capitalised, no space before punctuation, some English with two French
    translations), the special lines above and the malformed ones, with a blank line and a final newline."""
    lines = []
    for k, (en, fr, _) in enumerate(generate_grammar(num_pairs, seed=7)):
        english = " ".join(en).replace(" .", ".").capitalize()
        french = " ".join(fr).replace(" .", ".").capitalize()
        lines.append(f"{english}\t{french}")
        if k % 4 == 0:  # a second translation of the same English sentence
            lines.append(f"{english}\t{french[:-1]} !")
    lines[10:10] = SPECIAL_LINES
    lines[50:50] = MALFORMED_LINES[:2]
    lines[120:120] = ["", *MALFORMED_LINES[2:]]
    return "\n".join(lines) + "\n"


def write_fra(folder, num_pairs: int = 300, text: str | None = None):
    """Write ``fra.txt`` into ``folder``; return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fra.txt"
    path.write_text(synthetic_fra_text(num_pairs) if text is None else text, encoding="utf-8")
    return path


def canvas_region(images, index: int, grid: int = 3):
    """Region ``index`` (row-major) of canvases ``(n, 1, grid * REGION, grid * REGION)``: ``(n, REGION, REGION)``."""
    r, c = divmod(index, grid)
    return images[:, 0, r * REGION:(r + 1) * REGION, c * REGION:(c + 1) * REGION]
