"""The bundled corpora made by the course's own generators, with gold word alignments.

Snapshots live in the repository's ``data/`` folder as ``English<TAB>French<TAB>links`` lines
(links as ``i-j``, source-target token indices). ``python -m attn_utils.data.generate``
rewrites them, byte for byte the same. Where the package is installed without the repository
(e.g. Colab), the same text is generated in memory, so nothing depends on the files being there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..checks import check_positive_int, check_seed
from .dates import generate_dates
from .grammar import generate_grammar
from .paths import repository_data_dir
from .text import ParallelCorpus, format_alignment, parse_pairs


@dataclass(frozen=True)
class BundledCorpus:
    """A generator and the size and seed of its committed snapshot."""

    name: str
    filename: str
    generate: Callable
    num_examples: int
    seed: int
    description: str


BUNDLED = {
    "grammar": BundledCorpus("grammar", "grammar_en_fr.tsv", generate_grammar, 2500, 0,
                             "English→French phrase grammar (agreement, adjective order, ne … pas)"),
    "dates": BundledCorpus("dates", "dates_iso.tsv", generate_dates, 5000, 0,
                           "human-readable dates → ISO dates"),
}


def _spec(name: str) -> BundledCorpus:
    if not isinstance(name, str) or name not in BUNDLED:
        raise ValueError(f"unknown bundled corpus {name!r}; expected one of {sorted(BUNDLED)}")
    return BUNDLED[name]


def bundled_text(name: str, num_examples: int | None = None, seed: int | None = None) -> str:
    """The snapshot's text, generated now (``num_examples``/``seed``, ints, default to the snapshot's)."""
    spec = _spec(name)
    if num_examples is not None:
        check_positive_int("num_examples", num_examples, hint="or None (the snapshot's size)")
    if seed is not None:
        seed = check_seed("seed", seed)
    examples = spec.generate(spec.num_examples if num_examples is None else num_examples,
                             spec.seed if seed is None else seed)
    return "".join(f"{' '.join(en)}\t{' '.join(fr)}\t{format_alignment(links)}\n" for en, fr, links in examples)


def load_bundled(name: str, num_examples: int | None = None, seed: int | None = None) -> ParallelCorpus:
    """A bundled corpus with its alignments: the committed snapshot when it is there and the
    defaults are asked for, otherwise generated (identically) in memory. ``num_examples`` a positive int,
    ``seed`` an int (or None: the snapshot's)."""
    spec = _spec(name)
    if num_examples is not None:  # before the snapshot test below, where True would equal 1
        check_positive_int("num_examples", num_examples, hint="or None (the snapshot's size)")
    if seed is not None:  # likewise: False would equal 0
        seed = check_seed("seed", seed)
    data_dir = repository_data_dir()
    default = num_examples in (None, spec.num_examples) and seed in (None, spec.seed)
    if default and data_dir is not None and (data_dir / spec.filename).is_file():
        text = (data_dir / spec.filename).read_text(encoding="utf-8")
    else:
        text = bundled_text(name, num_examples, seed)
    return parse_pairs(text, name=name, with_alignments=True)
