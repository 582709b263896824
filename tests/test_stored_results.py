"""attn_utils.stored_results: the stored translator comparison is found, checked and summarised correctly."""

from __future__ import annotations

import copy
import json

import pytest

from attn_utils.stored_results import (
    RESULTS_FILE,
    check_translator_results,
    find_results_file,
    format_summary,
    load_stored_run,
    load_translator_results,
    plot_curves,
    summarize_runs,
)


def _run(model, seed, bleu, seconds=100.0):
    return {"model": model, "seed": seed, "parameters": 1000 + len(model), "steps": 30, "train_seconds": seconds,
            "bleu": bleu, "bleu_low": bleu - 1.0, "bleu_high": bleu + 1.5, "multi_bleu": bleu + 10.0,
            "multi_low": bleu + 8.0, "multi_high": bleu + 12.0,
            "curve": {"steps": [10, 20, 30], "seconds": [seconds / 3, 2 * seconds / 3, seconds],
                      "val_bleu": [bleu / 3, bleu / 2, bleu]}}


def _record():
    return {"commands": ["python benchmarks/compare_translators.py"], "commit": "abc", "machine": {"cores": 2},
            "torch": "2.13.0", "date": "2026-11-23", "corpus": {"pairs_in_file": 10}, "budget": {"steps": 30},
            "recipes": {"no attention": {}, "Bahdanau": {}}, "sweep": [],
            "runs": [_run("no attention", 0, 10.0), _run("Bahdanau", 0, 20.0, 200.0), _run("no attention", 1, 13.0),
                     _run("Bahdanau", 1, 26.0, 220.0), _run("Bahdanau", 2, 29.0, 240.0)],
            "grammar_runs": [{"model": "Bahdanau", "seed": 0, "bleu": 90.0, "aer": 0.1},
                             {"model": "Bahdanau", "seed": 1, "bleu": 91.0, "aer": 0.3}]}


def test_summarize_runs_gives_mean_min_max_over_seeds():
    rows = summarize_runs(_record())
    assert [r["model"] for r in rows] == ["no attention", "Bahdanau"]
    plain, bahdanau = rows
    assert plain["seeds"] == [0, 1] and plain["aer"] is None
    assert plain["bleu"] == pytest.approx({"mean": 11.5, "min": 10.0, "max": 13.0})
    assert bahdanau["bleu"] == pytest.approx({"mean": 25.0, "min": 20.0, "max": 29.0})
    assert bahdanau["multi_bleu"]["mean"] == pytest.approx(35.0)
    assert bahdanau["bleu_interval"] == pytest.approx((24.0, 26.5))
    assert bahdanau["aer"] == pytest.approx({"mean": 0.2, "min": 0.1, "max": 0.3})
    assert bahdanau["seconds"]["mean"] == pytest.approx(220.0)
    assert [r["model"] for r in summarize_runs(_record(), ["Bahdanau"])] == ["Bahdanau"]
    with pytest.raises(ValueError, match="no stored run of 'Luong dot'"):
        summarize_runs(_record(), ["Luong dot"])
    table = format_summary(rows).splitlines()
    assert len(table) == 3
    assert table[2].split() == ["Bahdanau", "3", "25.0", "(20.0-29.0)", "24.0-26.5", "35.0", "0.200",
                                "(0.100-0.300)", "1,008", "220"]
    assert table[1].split()[:6] == ["no", "attention", "2", "11.5", "(10.0-13.0)", "10.5-13.0"]


@pytest.mark.parametrize("breakage, message", [
    (lambda r: r.pop("runs"), r"missing fields \['runs'\]"),
    (lambda r: r["runs"][0].pop("multi_bleu"), r"run 0 \('no attention'\) lacks \['multi_bleu'\]"),
    (lambda r: r["runs"][1]["curve"]["seconds"].pop(), "equally long"),
    (lambda r: r["runs"][2].update(model="Luong dot"), "which has no recipe"),
    (lambda r: r["runs"][3].update(bleu_low=30.0), "lies outside its interval"),
    (lambda r: r.update(runs=[]), "non-empty list"),
])
def test_check_translator_results_names_what_is_wrong(breakage, message):
    record = copy.deepcopy(_record())
    check_translator_results(record)
    breakage(record)
    with pytest.raises(ValueError, match=message):
        check_translator_results(record)


def test_load_translator_results_finds_the_file_above_the_working_directory(tmp_path, monkeypatch):
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / RESULTS_FILE).write_text(json.dumps(_record()), encoding="utf-8")
    chapter = tmp_path / "chapters" / "part2"
    chapter.mkdir(parents=True)
    monkeypatch.chdir(chapter)
    assert find_results_file() == results / RESULTS_FILE
    assert load_translator_results()["runs"][4]["bleu"] == 29.0
    (results / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="is not a JSON file of stored results"):
        load_translator_results(results / "broken.json")


def test_load_stored_run_finds_a_benchmark_file_above_the_start_or_returns_none(tmp_path, monkeypatch):
    results = tmp_path / "repository" / "benchmarks" / "results"
    results.mkdir(parents=True)
    run = {"benchmark": "layer_costs", "device_type": "cuda", "device_name": "GPU X",
           "results": [{"n": 16, "GRU": {"ms": 0.25}}]}
    (results / "layer_costs_cuda.json").write_text(json.dumps(run), encoding="utf-8")
    chapter = tmp_path / "repository" / "chapters" / "part3"
    chapter.mkdir(parents=True)
    monkeypatch.chdir(chapter)
    assert load_stored_run("layer_costs_cuda") == run  # from the working directory upwards
    assert load_stored_run("layer_costs_cuda.json")["results"][0]["GRU"]["ms"] == 0.25
    assert load_stored_run("multihead_cuda") is None  # no such run: the chapter says so
    elsewhere = tmp_path / "colab"  # a copy of the course without the repository
    elsewhere.mkdir()
    assert load_stored_run("layer_costs_cuda", start=elsewhere) is None
    assert load_stored_run("layer_costs_cuda", start=chapter)["device_name"] == "GPU X"
    (results / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.json is not a JSON file of stored results"):
        load_stored_run("broken")
    (results / "list.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="expected a JSON object .* got list"):
        load_stored_run("list")


def test_the_stored_gpu_runs_name_their_device():
    """Every CUDA run the chapters show is found from the tests' folder and labelled with its GPU."""
    from pathlib import Path

    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    names = sorted(p.stem for p in results.glob("*_cuda*.json"))
    assert "layer_costs_cuda" in names and "multihead_cuda" in names
    for name in names:
        run = load_stored_run(name, start=__file__)
        assert run is not None and run["device_type"] == "cuda", name
        assert run["device_name"].startswith("NVIDIA "), name


def test_plot_curves_draws_one_line_per_run():
    pytest.importorskip("matplotlib")
    ax = plot_curves(_record(), x="seconds")
    assert len(ax.lines) == 5 and ax.get_xlabel() == "seconds of training"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["no attention", "Bahdanau"]
    with pytest.raises(ValueError, match="x must be 'steps' or 'seconds', got 'tokens'"):
        plot_curves(_record(), x="tokens")


def test_the_stored_comparison_matches_the_book_recipes():
    """The committed benchmark file is valid and was made with the recipes and budget the package has now."""
    from attn_utils.compare import BOOK_BATCH, BOOK_RECIPES, BOOK_STEPS

    path = find_results_file(start=__file__)
    assert path is not None, f"benchmarks/results/{RESULTS_FILE} is missing: run benchmarks/compare_translators.py"
    record = load_translator_results(path)
    assert record["budget"]["steps"] == BOOK_STEPS and record["budget"]["batch_size"] == BOOK_BATCH
    for name, recipe in record["recipes"].items():
        assert recipe == json.loads(json.dumps(BOOK_RECIPES[name]._asdict())), name
    for run in record["runs"]:
        assert run["steps"] == BOOK_STEPS, run["model"]
        assert run["curve"]["steps"][-1] == BOOK_STEPS and run["curve"]["val_bleu"], run["model"]
        assert 0 <= run["bleu"] <= 100 and run["multi_bleu"] >= run["bleu"] - 5, run["model"]
    for sweep in record["sweep"]:
        assert sweep["warmup"] == BOOK_RECIPES[sweep["model"]].train["warmup"], sweep
    swept = {sweep["model"] for sweep in record["sweep"]}
    for name in swept:  # each swept model is trained with the learning rate that did best in the sweep
        best = max((s for s in record["sweep"] if s["model"] == name), key=lambda s: s["val_bleu"])
        assert BOOK_RECIPES[name].train["lr"] == best["lr"], (name, best)


def _printed(cell: dict) -> str:
    return "".join("".join(out.get("text", "")) for out in cell.get("outputs", []))


STORED_TABLE_CHAPTERS = ["part2_seq2seq/04_encoder_decoder.ipynb", "part2_seq2seq/05_bahdanau_attention.ipynb",
                         "part2_seq2seq/06_luong_attention.ipynb", "part3_transformer/10_transformer.ipynb"]


@pytest.mark.parametrize("chapter", STORED_TABLE_CHAPTERS)
def test_the_chapters_stored_tables_agree_with_the_file(chapter):
    """Every table a chapter printed from the stored comparison (``format_summary``) shows, row for row, what the
    committed file gives now (a row of n seeds: the file's seeds 0 to n - 1): a re-run benchmark without re-executed
    chapters fails here."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    record = load_translator_results(find_results_file(start=__file__))
    names = sorted({run["model"] for run in record["runs"]}, key=len, reverse=True)  # longest first: no prefix clash
    cells = json.loads((root / "chapters" / chapter).read_text(encoding="utf-8"))["cells"]
    tables = [_printed(c) for c in cells if c["cell_type"] == "code" and "format_summary(" in "".join(c["source"])]
    assert tables, f"{chapter} prints no table from the stored comparison"
    checked = 0
    for text in tables:
        lines = text.splitlines()
        header = next((k for k, line in enumerate(lines) if line.startswith("model ")), None)
        assert header is not None, f"{chapter} has a stored-results table without output: `make execute NB=...`"
        for line in lines[header + 1:]:
            name = next((n for n in names if line.startswith(n + " ")), None)
            if name is None:
                break  # the table ends at the first line that is not a model's row
            count = int(line[len(name):].split()[0])  # the row's number of seeds: a table of seed 0 only
            first_seeds = {**record, "runs": [run for run in record["runs"] if run["seed"] < count]}
            expected = format_summary(summarize_runs(first_seeds, [name])).splitlines()[1]
            assert line.split() == expected.split(), (chapter, name)
            checked += 1
    assert checked, f"{chapter}'s stored-results tables hold no model row"


def _record_with_buckets():
    """A record of the new form: per-bucket BLEU in every run, test translations, the test set's references."""
    record = copy.deepcopy(_record())
    references = ["a b c d e", "f g h i j", "k l m n o p q r s t u v", "w x y z a b c d e f g h"]
    record["corpus"]["buckets"] = [[1, 8], [9, None]]
    record["test_set"] = {"references": references, "lengths": [5, 5, 12, 12]}
    for run in record["runs"]:
        run["by_length"] = [{"bucket": "1-8", "pairs": 2, "bleu": run["bleu"] + 5, "low": run["bleu"] + 3,
                             "high": run["bleu"] + 7},
                            {"bucket": "9+", "pairs": 2, "bleu": run["bleu"] - 5, "low": run["bleu"] - 8,
                             "high": run["bleu"] - 2}]
        good = run["model"] == "Bahdanau"
        run["hypotheses"] = [r if good or i % 2 else r.replace(r.split()[1], "zz") for i, r in enumerate(references)]
    return record


def test_by_length_summary_and_table():
    from attn_utils.stored_results import format_by_length, summarize_by_length

    rows = summarize_by_length(_record_with_buckets())
    assert [(r["model"], r["bucket"]) for r in rows] == [("no attention", "1-8"), ("no attention", "9+"),
                                                         ("Bahdanau", "1-8"), ("Bahdanau", "9+")]
    assert rows[3]["bleu"] == pytest.approx({"mean": 20.0, "min": 15.0, "max": 24.0})
    assert rows[3]["interval"] == pytest.approx((17.0, 23.0))
    table = format_by_length(rows).splitlines()
    assert table[0].split() == ["English", "tokens", "1-8", "9+"] and table[1].split()[-2:] == ["2", "2"]
    assert table[3].split() == ["Bahdanau", "30.0", "(25.0-34.0)", "20.0", "(15.0-24.0)"]
    with pytest.raises(ValueError, match="hold no 'by_length'"):
        summarize_by_length(_record())


def test_compare_stored_is_the_paired_test_on_the_stored_translations():
    from attn_utils.metrics import paired_bootstrap_bleu
    from attn_utils.stored_results import compare_stored

    record = _record_with_buckets()
    check_translator_results(record)
    rows = compare_stored(record, "Bahdanau", "no attention", num_samples=30, seed=1)
    assert [(r["bucket"], r["pairs"]) for r in rows] == [("all", 4), ("1-8", 2), ("9+", 2)]
    runs = {name: [r["hypotheses"] for r in record["runs"] if r["model"] == name]
            for name in ("Bahdanau", "no attention")}
    expected = paired_bootstrap_bleu(runs["Bahdanau"], runs["no attention"], record["test_set"]["references"],
                                     num_samples=30, seed=1)
    assert (rows[0]["difference"], rows[0]["low"], rows[0]["high"]) == pytest.approx(expected[:3])
    assert rows[0]["difference"] > 0  # the untouched translations beat the ones with a word replaced
    broken = copy.deepcopy(record)
    broken["runs"][0]["hypotheses"].pop()
    with pytest.raises(ValueError, match="holds 3 test translations for 4 stored references"):
        check_translator_results(broken)
    with pytest.raises(ValueError, match="no test set"):
        compare_stored(_record(), "Bahdanau", "no attention")


def test_format_variants_gives_each_variant_and_its_paired_difference():
    from attn_utils.stored_results import format_variants

    runs = {"rotary": [{"seed": 0, "bpc": 2.0}, {"seed": 1, "bpc": 2.2}],
            "learned": [{"seed": 0, "bpc": 2.1}, {"seed": 1, "bpc": 2.5}]}
    lines = format_variants(runs, "bpc", 2).splitlines()
    assert lines[0].split() == ["rotary", "2.10", "(2.00–2.20)"]
    assert lines[1].split() == ["learned", "2.30", "(2.10–2.50)", "difference", "+0.20", "(+0.10–+0.30)"]
