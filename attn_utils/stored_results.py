"""The stored comparison of the translators (``benchmarks/compare_translators.py``), read and summarised.

Chapters 6 and 10 train one seed of a model live; the mean over seeds, the spread and the learning
curves of every model come from the benchmark's file, ``benchmarks/results/translators_cpu.json``.
``load_translator_results`` finds it in the repository (from the working directory upwards) or, where
the course was installed without the repository (Colab), downloads it from the repository;
``check_translator_results`` validates its schema, ``summarize_runs`` gives one row per model (mean,
min and max over seeds) and ``format_summary`` prints them; ``summarize_by_length`` and
``format_by_length`` do the same for BLEU in each English length bucket of the test set, and
``compare_stored`` compares two models bucket by bucket with paired bootstrap resampling of the stored
test translations.

The other benchmarks store one run each, labelled with its device (``benchmarks/results/*_cuda*.json``:
chapter 8's layer costs, chapter 9's multi-head attention, section 11's caches, memory and kernels);
``load_stored_run`` reads one where the repository is present and returns None elsewhere, so that a
chapter read without the repository (Colab) says that it has no stored run instead of failing.
"""

from __future__ import annotations

import json
import numbers
import os
import statistics
import urllib.request
from pathlib import Path

from .checks import check_non_negative_int
from .metrics import paired_bleu_by_length, paired_bootstrap_bleu, spread

RESULTS_FILE = "translators_cpu.json"
RESULTS_URL = "https://raw.githubusercontent.com/attention-course/attention-course/main/benchmarks/results/"

#: the fields of the file and of each of its runs (``check_translator_results`` requires them)
RECORD_FIELDS = ("commands", "commit", "machine", "torch", "date", "corpus", "budget", "recipes", "sweep", "runs",
                 "grammar_runs")
RUN_FIELDS = ("model", "seed", "parameters", "steps", "train_seconds", "bleu", "bleu_low", "bleu_high",
              "multi_bleu", "multi_low", "multi_high", "curve")
CURVE_FIELDS = ("steps", "seconds", "val_bleu")


def find_results_file(name: str = RESULTS_FILE, start: str | Path | None = None) -> Path | None:
    """``benchmarks/results/<name>`` in ``start`` (default: the working directory) or a parent, or None. ``name``
    is a file name, ``start`` a string or a path."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a file name (a non-empty string), got {name!r:.60}")
    if start is not None and not isinstance(start, (str, os.PathLike)):
        raise ValueError(f"start must be a string, a path or None, got {type(start).__name__}")
    start = Path.cwd() if start is None else Path(start)
    for folder in [start, *start.parents]:
        candidate = folder / "benchmarks" / "results" / name
        if candidate.is_file():
            return candidate
    return None


def load_stored_run(name: str, start: str | Path | None = None) -> dict | None:
    """The stored benchmark run ``benchmarks/results/<name>.json`` (``name`` with or without ``.json``) found in
    ``start`` (default: the working directory) or a parent, as a dict; None where there is no such file.
    A file that is not a JSON object raises a ``ValueError`` naming it."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be the name of a stored run (a non-empty string), got {name!r:.60}")
    filename = name if name.endswith(".json") else f"{name}.json"
    path = find_results_file(filename, start)
    if path is None:
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not a JSON file of stored results: {err}") from err
    if not isinstance(record, dict):
        raise ValueError(f"{path}: expected a JSON object (one stored run), got {type(record).__name__}")
    return record


def load_translator_results(path: str | Path | None = None, name: str = RESULTS_FILE) -> dict:
    """The stored comparison: from ``path``, else the repository's ``benchmarks/results/<name>``, else
    downloaded from the repository. The record is checked (``check_translator_results``)."""
    if path is None:
        path = find_results_file(name)
    if path is not None:
        text = Path(path).read_text(encoding="utf-8")
        origin = str(path)
    else:
        url = RESULTS_URL + name
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                text = response.read().decode("utf-8")
        except OSError as err:
            raise FileNotFoundError(f"no benchmarks/results/{name} above the working directory, and it could not "
                                    f"be downloaded from {url}: {err}") from err
        origin = url
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{origin} is not a JSON file of stored results: {err}") from err
    check_translator_results(record, origin)
    return record


def check_translator_results(record: dict, origin: str = "the record") -> None:
    """Raise a ``ValueError`` naming what is missing or malformed in a stored comparison."""
    if not isinstance(record, dict):
        raise ValueError(f"{origin}: expected a JSON object, got {type(record).__name__}")
    missing = [f for f in RECORD_FIELDS if f not in record]
    if missing:
        raise ValueError(f"{origin}: missing fields {missing} (expected {list(RECORD_FIELDS)})")
    if not isinstance(record["runs"], list) or not record["runs"]:
        raise ValueError(f"{origin}: 'runs' must be a non-empty list of runs")
    for k, run in enumerate(record["runs"]):
        if not isinstance(run, dict):
            raise ValueError(f"{origin}: run {k} must be a JSON object, got {type(run).__name__}")
        missing = [f for f in RUN_FIELDS if f not in run]
        if missing:
            raise ValueError(f"{origin}: run {k} ({run.get('model')!r}) lacks {missing}")
        if run["model"] not in record["recipes"]:
            raise ValueError(f"{origin}: run {k} is of {run['model']!r}, which has no recipe")
        bad = [f for f in ("bleu", "bleu_low", "bleu_high", "multi_bleu", "train_seconds")
               if isinstance(run[f], bool) or not isinstance(run[f], numbers.Real)]
        if bad:
            raise ValueError(f"{origin}: run {k} ({run['model']!r}) needs numbers in {bad}, got "
                             f"{[run[f] for f in bad]}")
        curve = run["curve"]
        if not isinstance(curve, dict) or any(f not in curve for f in CURVE_FIELDS) or len(
                {len(curve[f]) for f in CURVE_FIELDS}) != 1:
            raise ValueError(f"{origin}: run {k} ({run['model']!r}) needs a curve with equally long "
                             f"{list(CURVE_FIELDS)}")
        if not run["bleu_low"] <= run["bleu"] <= run["bleu_high"]:
            raise ValueError(f"{origin}: run {k} ({run['model']!r}): BLEU {run['bleu']} lies outside its interval "
                             f"[{run['bleu_low']}, {run['bleu_high']}]")
        if "hypotheses" in run and len(run["hypotheses"]) != len(record.get("test_set", {}).get("references", ())):
            raise ValueError(f"{origin}: run {k} ({run['model']!r}) holds {len(run['hypotheses'])} test translations "
                             f"for {len(record.get('test_set', {}).get('references', ()))} stored references")


def _spread(values: list[float]) -> dict:
    return spread(values)._asdict()  # {"mean", "min", "max"}


def _check_record(record, models=None) -> None:
    """Raise unless ``record`` looks like a stored comparison (a dict whose ``runs`` are dicts naming their model)
    and ``models`` is None or a non-empty list of names: a string would be read letter by letter."""
    if not isinstance(record, dict) or not isinstance(record.get("runs"), list) or not all(
            isinstance(run, dict) and "model" in run for run in record["runs"]):
        raise ValueError(f"record must be a stored comparison (load_translator_results), got "
                         f"{type(record).__name__} {record!r:.60}")
    if models is not None and (isinstance(models, str) or not isinstance(models, (list, tuple)) or not models
                               or not all(isinstance(m, str) for m in models)):
        raise ValueError(f"models must be a non-empty list of model names, or None for all, got {models!r:.60}")


def summarize_runs(record: dict, models=None) -> list[dict]:
    """One row per model (in the order of ``models``, default: of the runs): the seeds, and mean / min / max
    over them of test BLEU (one reference), multi-reference BLEU, seconds of training and the alignment
    error rate of the same model trained on the grammar corpus (``None`` without attention); the mean
    bootstrap interval; parameters. ``record`` comes from ``load_translator_results``; ``models`` is a list of
    names or None."""
    _check_record(record, models)
    runs = record["runs"]
    names = models or list(dict.fromkeys(run["model"] for run in runs))
    rows = []
    for name in names:
        mine = [run for run in runs if run["model"] == name]
        if not mine:
            raise ValueError(f"no stored run of {name!r}; the file has {sorted({r['model'] for r in runs})}")
        aers = [run["aer"] for run in record["grammar_runs"] if run["model"] == name and run["aer"] is not None]
        rows.append({
            "model": name, "seeds": [run["seed"] for run in mine], "parameters": mine[0]["parameters"],
            "steps": mine[0]["steps"],
            "bleu": _spread([run["bleu"] for run in mine]),
            "bleu_interval": (statistics.fmean(run["bleu_low"] for run in mine),
                              statistics.fmean(run["bleu_high"] for run in mine)),
            "multi_bleu": _spread([run["multi_bleu"] for run in mine]),
            "aer": _spread(aers) if aers else None,
            "seconds": _spread([run["train_seconds"] for run in mine]),
        })
    return rows


def format_summary(rows: list[dict]) -> str:
    """The rows of ``summarize_runs`` as a fixed-width table: test BLEU as mean (min-max) over the seeds, the
    mean of the seeds' bootstrap 95 % intervals, multi-reference BLEU, AER as mean (min-max), parameters and
    seconds of training (mean)."""
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "model" in r for r in rows):
        raise ValueError(f"rows must be the list of summarize_runs, got {type(rows).__name__} {rows!r:.60}")
    width = max([15, *(len(r["model"]) for r in rows)])
    lines = [f"{'model':<{width}} {'seeds':>5} {'test BLEU (min-max)':>19} {'95% interval':>12} "
             f"{'multi-ref':>9} {'grammar AER (min-max)':>21} {'parameters':>10} {'seconds':>7}"]
    for r in rows:
        bleu, multi, (low, high) = r["bleu"], r["multi_bleu"], r["bleu_interval"]
        aer = "-" if r["aer"] is None else f"{r['aer']['mean']:.3f} ({r['aer']['min']:.3f}-{r['aer']['max']:.3f})"
        lines.append(f"{r['model']:<{width}} {len(r['seeds']):>5} "
                     f"{bleu['mean']:>7.1f} ({bleu['min']:4.1f}-{bleu['max']:4.1f}) {low:>6.1f}-{high:<5.1f} "
                     f"{multi['mean']:>9.1f} {aer:>21} {r['parameters']:>10,} {r['seconds']['mean']:>7.0f}")
    return "\n".join(lines)


def _runs_of(record: dict, name: str, need: str) -> list[dict]:
    runs = [run for run in record["runs"] if run["model"] == name]
    if not runs:
        raise ValueError(f"no stored run of {name!r}; the file has {sorted({r['model'] for r in record['runs']})}")
    if any(need not in run for run in runs):
        raise ValueError(f"the stored runs of {name!r} hold no {need!r}: the file predates it, rerun "
                         "benchmarks/compare_translators.py")
    return runs


def summarize_by_length(record: dict, models=None) -> list[dict]:
    """One row per model and length bucket of the test set: ``{"model", "bucket", "pairs", "bleu"}`` with
    ``bleu`` the mean / min / max over the seeds, and ``"interval"``, the mean of the seeds' bootstrap 95 %
    intervals (``by_length`` of each run)."""
    _check_record(record, models)
    names = models or list(dict.fromkeys(run["model"] for run in record["runs"]))
    rows = []
    for name in names:
        runs = _runs_of(record, name, "by_length")
        for i, bucket in enumerate(runs[0]["by_length"]):
            cells = [run["by_length"][i] for run in runs]
            rows.append({"model": name, "bucket": bucket["bucket"], "pairs": bucket["pairs"],
                         "bleu": _spread([c["bleu"] for c in cells]),
                         "interval": (statistics.fmean(c["low"] for c in cells),
                                      statistics.fmean(c["high"] for c in cells))})
    return rows


def format_by_length(rows: list[dict]) -> str:
    """``summarize_by_length``'s rows as a table: one line per model, one column per bucket, each test BLEU as
    mean (min-max) over the seeds."""
    buckets = list(dict.fromkeys(r["bucket"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    pairs = {r["bucket"]: r["pairs"] for r in rows}
    width = max([15, *(len(m) for m in models)])
    lines = [f"{'English tokens':<{width}} " + " ".join(f"{b:>17}" for b in buckets),
             f"{'test pairs':<{width}} " + " ".join(f"{pairs[b]:>17}" for b in buckets)]
    for model in models:
        cells = {r["bucket"]: r["bleu"] for r in rows if r["model"] == model}
        lines.append(f"{model:<{width}} " + " ".join(
            f"{cells[b]['mean']:>5.1f} ({cells[b]['min']:4.1f}-{cells[b]['max']:4.1f})" if b in cells else f"{'-':>17}"
            for b in buckets))
    return "\n".join(lines)


def compare_stored(record: dict, model_a: str, model_b: str, num_samples: int = 1000, seed: int = 0) -> list[dict]:
    """``model_a`` against ``model_b`` on the stored test set, each the mean BLEU of its seeds: paired bootstrap
    resampling of the stored translations (``metrics.paired_bootstrap_bleu``) over the whole test set (bucket
    ``"all"``) and within each length bucket. One dict per row: ``{"bucket", "pairs", "difference", "low",
    "high", "a_wins"}`` (difference = BLEU of A minus B). ``num_samples`` is a positive int, ``seed`` an int."""
    _check_record(record, [model_a, model_b])
    if "test_set" not in record:
        raise ValueError("the stored comparison holds no test set ('test_set'): rerun "
                         "benchmarks/compare_translators.py")
    references, lengths = record["test_set"]["references"], record["test_set"]["lengths"]
    runs_a = [run["hypotheses"] for run in _runs_of(record, model_a, "hypotheses")]
    runs_b = [run["hypotheses"] for run in _runs_of(record, model_b, "hypotheses")]
    overall = paired_bootstrap_bleu(runs_a, runs_b, references, num_samples=num_samples, seed=seed)
    buckets = [(low, high) for low, high in record["corpus"]["buckets"]]
    return [{"bucket": "all", "pairs": len(references), **overall._asdict()},
            *paired_bleu_by_length(runs_a, runs_b, references, lengths, buckets, num_samples=num_samples, seed=seed)]


def format_variants(runs: dict, metric: str, digits: int) -> str:
    """A stored run of variants (``{variant: [{"seed", metric, ...}, ...]}``, the first variant the reference, as
    ``benchmarks/lm_choices.py`` stores them) as lines: each variant's ``metric`` as mean (range) over its seeds,
    and, after the first, its seed-by-seed difference from the first, mean (range). Every variant has the same
    seeds in the same order; ``digits`` is an int >= 0."""
    check_non_negative_int("digits", digits)
    if not isinstance(runs, dict) or not runs or not all(
            isinstance(rows, list) and rows and all(isinstance(r, dict) and metric in r for r in rows)
            for rows in runs.values()):
        raise ValueError(f"runs must be a non-empty dict {{variant: [{{'seed': ..., {metric!r}: ...}}, ...]}}, every "
                         f"row holding {metric!r}, got {runs!r:.80}")
    reference_name = next(iter(runs))
    reference = [r[metric] for r in runs[reference_name]]
    seeds = [r.get("seed") for r in runs[reference_name]]
    lines = []
    for name, rows in runs.items():
        if [r.get("seed") for r in rows] != seeds:  # a difference of two seeds' runs would mean nothing
            raise ValueError(f"every variant needs the seeds of {reference_name!r} in the same order, {seeds}; "
                             f"{name!r} has {[r.get('seed') for r in rows]}")
        values = [r[metric] for r in rows]
        line = f"  {name:<42} {spread(values):.{digits}f}"
        if name != reference_name:
            line += f"   difference {spread([v - ref for v, ref in zip(values, reference)]):+.{digits}f}"
        lines.append(line)
    return "\n".join(lines)


def plot_curves(record: dict, models=None, x: str = "steps", ax=None):
    """Validation BLEU against ``x`` (``"steps"`` or ``"seconds"``) for every stored run: one colour per
    model, one line per seed. Returns the axes."""
    from matplotlib import pyplot as plt

    if x not in ("steps", "seconds"):
        raise ValueError(f"x must be 'steps' or 'seconds', got {x!r}")
    _check_record(record, models)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2), layout="constrained")
    names = models or list(dict.fromkeys(run["model"] for run in record["runs"]))
    for k, name in enumerate(names):
        first = True
        for run in record["runs"]:
            if run["model"] == name:
                ax.plot(run["curve"][x], run["curve"]["val_bleu"], color=f"C{k}", marker=".", lw=1,
                        label=name if first else None)
                first = False
    ax.set(xlabel="training steps" if x == "steps" else "seconds of training", ylabel="validation BLEU")
    ax.legend(fontsize=8)
    return ax
