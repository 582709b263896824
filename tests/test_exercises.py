"""The exercise checkers: every reference solution passes, every stub and wrong answer gets a helpful message."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from attn_utils import exercises
from attn_utils.exercises import ExerciseFailed, check_exercise, grade
from tools import editions, notebook_setup

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = notebook_setup.notebooks()
CODING = {}  # label -> (notebook, cells)
for _path in notebook_setup.notebooks():
    for _label, _cells in editions.coding_exercises(nbformat.read(_path, as_version=4)).items():
        CODING[_label] = (_path, _cells)
LABELS = sorted(CODING)


def _function(source: str):
    """The one function ``my_...`` that a stub or solution cell defines."""
    namespace: dict = {}
    exec(compile(source, "<cell>", "exec"), namespace)  # our own notebook cells
    functions = [v for k, v in namespace.items() if k.startswith("my_") and callable(v)]
    assert len(functions) == 1, "a stub or solution cell defines exactly one function my_..."
    return functions[0]


def test_every_checker_belongs_to_a_notebook_exercise_and_back():
    assert sorted(exercises.labels()) == LABELS


CHECKER_FILES = sorted((ROOT / "attn_utils" / "exercises").glob("ch[0-9][0-9]*.py"))


def test_checker_modules_are_discovered_not_listed():
    """Every ``chNN*.py`` in attn_utils/exercises is imported by the package, in sorted order."""
    assert len(CHECKER_FILES) >= 11
    assert list(exercises.CHECKER_MODULES) == [p.stem for p in CHECKER_FILES]
    for path in CHECKER_FILES:
        assert f"attn_utils.exercises.{path.stem}" in sys.modules, f"{path.name} is not imported"


@pytest.mark.parametrize("path", CHECKER_FILES, ids=[p.stem for p in CHECKER_FILES])
def test_each_checker_module_registers_its_exercises(path):
    registered = re.findall(r"""^@register\(\s*["']([\w-]+)["']""", path.read_text(encoding="utf-8"), re.MULTILINE)
    assert registered, f"{path.name} registers no exercise (@register(\"chNN-label\"))"
    assert set(registered) <= set(exercises.labels()), f"{path.name}'s exercises are not registered"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_each_chapter_has_two_or_more_checked_coding_exercises(path):
    assert sum(nb_path == path for nb_path, _ in CODING.values()) >= 2


@pytest.mark.parametrize("label", LABELS)
def test_reference_solution_passes(label, capsys):
    solution = _function(CODING[label][1]["solution"].source)
    result = grade(label, solution)
    assert result.passed and result.score == 1.0, result.message
    check_exercise(label, solution)
    assert capsys.readouterr().out.startswith(f"{label}: all ")


@pytest.mark.parametrize("label", LABELS)
def test_stub_says_not_implemented(label, capsys):
    stub_cell = CODING[label][1]["stub"]
    assert "raise NotImplementedError" in stub_cell.source
    stub = _function(stub_cell.source)
    result = grade(label, stub)
    assert not result.passed and result.not_implemented and result.score == 0.0
    check_exercise(label, stub)  # prints, does not raise: the student edition runs top to bottom
    assert "not implemented yet" in capsys.readouterr().out and "NotImplementedError" in result.message


@pytest.mark.parametrize("label", LABELS)
def test_wrong_answer_names_case_expected_and_got(label):
    def wrong(*args, **kwargs):
        return torch.full((2, 2), 7.0, device=args[0].device)

    result = grade(label, wrong)
    assert not result.passed and result.cases_passed == 0
    assert re.search(r"Case '.+' failed: expected .+, got .+", result.message), result.message
    with pytest.raises(ExerciseFailed, match="failed: expected"):
        check_exercise(label, wrong)


def test_crash_and_near_misses_are_reported_by_case():
    def crashes(queries, keys, values, temperature):
        raise RuntimeError("shapes do not match")

    message = grade("ch01-write-soft-lookup", crashes).message
    assert "raised RuntimeError: shapes do not match" in message and "Case '" in message

    def exits(queries, keys, values, temperature):  # ended an instructor's whole grading loop before
        sys.exit(3)

    result = grade("ch01-write-soft-lookup", exits)
    assert not result.passed and result.cases_passed == 0
    assert "called exit() or sys.exit() (SystemExit: 3) instead of returning a result" in result.message

    def interrupted(queries, keys, values, temperature):  # Ctrl-C still stops everything
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        grade("ch01-write-soft-lookup", interrupted)

    def unstable(queries, keys, values, temperature):  # the textbook formula without the row maximum
        w = torch.exp(-((queries[:, None] - keys[None]) ** 2).sum(-1) / temperature)
        return (w / w.sum(-1, keepdim=True)) @ values

    result = grade("ch01-write-soft-lookup", unstable)
    assert 0 < result.cases_passed < result.cases_total
    assert "50 km away" in result.message and "got NaN" in result.message

    def keys_only(queries, keys, values, query_lens, key_lens, W_q, W_k, w_v, b):  # padded queries not zeroed
        from attn_utils import masked_softmax
        scores = torch.tanh((queries @ W_q.T + b)[:, :, None] + (keys @ W_k.T)[:, None]) @ w_v
        return masked_softmax(scores, key_lens) @ values

    message = grade("ch03-padded-additive", keys_only).message
    assert "Case 'query lengths 1 and 2: the outputs of padded queries are all zeros' failed" in message
    assert "largest difference" in message

    def one_per_example(x, y, widths):  # an error per example instead of one per width
        return (y - y.mean()) ** 2

    assert "expected shape (4,), got shape (7,)" in grade("ch02-write-group-mask", one_per_example).message

    def diagonal_only(x, y, widths):  # leave-one-out: misses the duplicates
        visible = ~torch.eye(len(x), dtype=torch.bool, device=x.device)
        scores = -(((x[:, None] - x[None, :]) / widths[:, None, None]) ** 2) / 2  # (widths, m, m)
        weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
        return ((weights @ y - y) ** 2).mean(dim=-1)

    assert "Case 'every input twice' failed" in grade("ch02-write-group-mask", diagonal_only).message


def test_bad_arguments_raise_value_errors():
    with pytest.raises(ValueError, match="no checker for exercise 'ch99-nope'.*ch01-write-soft-lookup"):
        grade("ch99-nope", lambda: None)
    with pytest.raises(ValueError, match="pass the function itself"):
        grade("ch01-write-hard-lookup", 3.0)


def test_a_function_that_changes_its_input_fails_and_leaves_the_checker_intact():
    from attn_utils import soft_lookup
    from attn_utils.exercises import ch01

    stations, walk = ch01.STATIONS.clone(), ch01.WALK.clone()

    def right_answer_but_zeroes_keys(queries, keys, values, temperature):
        out = soft_lookup(queries, keys, values, temperature=temperature)[0]
        keys.zero_()  # the checker's STATIONS, before each case got a copy
        queries.add_(1.0)
        return out

    result = grade("ch01-write-soft-lookup", right_answer_but_zeroes_keys)
    assert not result.passed and result.cases_passed == 0
    assert ("your function modified its input 'queries' (argument 1) in place; work on a copy (x.clone()) "
            "or use out-of-place operations") in result.message
    assert torch.equal(ch01.STATIONS, stations) and torch.equal(ch01.WALK, walk)
    solution = _function(CODING["ch01-write-soft-lookup"][1]["solution"].source)
    assert grade("ch01-write-soft-lookup", solution).passed  # the cases are as they were

    contributions = _function(CODING["ch09-head-contributions"][1]["solution"].source)

    def right_answer_then_zeroes_queries(queries, *args):
        out = contributions(queries, *args)
        queries.zero_()
        return out

    message = grade("ch09-head-contributions", right_answer_then_zeroes_queries).message
    assert "modified its input 'queries' (argument 1) in place" in message
    assert grade("ch09-head-contributions", contributions).passed  # the cases are as they were


def test_a_changed_keyword_input_is_named(monkeypatch):
    from attn_utils.exercises import core

    data = torch.arange(4.0)
    monkeypatch.setitem(core.REGISTRY, "test-kwargs", lambda device: [
        core.Case("double", (data,), 2 * data, kwargs={"scale": torch.tensor(2.0)})])

    def scales_in_place(x, scale):
        scale.mul_(1.0)  # the same values: not a change
        return x * scale

    assert grade("test-kwargs", scales_in_place).passed

    def changes_scale(x, scale):
        return x * scale.fill_(3.0)

    message = grade("test-kwargs", changes_scale).message
    assert "modified its input 'scale' in place" in message and torch.equal(data, torch.arange(4.0))


def test_a_slow_function_fails_on_time_without_waiting_for_it():
    import threading
    import time

    release, calls = threading.Event(), []

    def sleeps(queries, keys, values, temperature):  # blocks for 60 s, or until the test releases it
        calls.append(1)
        release.wait(60.0)
        return queries

    start = time.perf_counter()
    try:
        result = grade("ch01-write-soft-lookup", sleeps, timeout=0.2)
        # Gave up on the first case and did not run the others: called once, and back long before the 60 s that
        # waiting would take (a generous bound: a loaded machine may be slow, but not by a minute).
        assert len(calls) == 1 and time.perf_counter() - start < 30.0
        with pytest.raises(ExerciseFailed, match="took more than 0.2 s"):
            check_exercise("ch01-write-soft-lookup", sleeps, timeout=0.2)
    finally:
        release.set()  # the abandoned calls return at once
    assert not result.passed and result.cases_passed == 0
    assert re.search(r"Case '(.+)' failed: case '\1' took more than 0.2 s: .*the 5 cases after it were not run",
                     result.message), result.message
    with pytest.raises(ValueError, match="timeout"):
        grade("ch01-write-soft-lookup", sleeps, timeout=0)
    solution = _function(CODING["ch01-write-soft-lookup"][1]["solution"].source)
    assert grade("ch01-write-soft-lookup", solution, timeout=None).passed  # no limit: run in this thread
    assert grade("ch01-write-soft-lookup", solution, timeout=5).passed


def test_the_call_keeps_the_callers_grad_mode(monkeypatch):
    """The call runs in a thread of its own, and grad mode is per thread: it gets the caller's."""
    from attn_utils.exercises import core

    seen = []
    cases = [core.Case("any", (torch.ones(2),), torch.ones(2))]
    monkeypatch.setitem(core.REGISTRY, "test-grad-mode", lambda device: cases)
    with torch.no_grad():
        assert grade("test-grad-mode", lambda x: seen.append(torch.is_grad_enabled()) or x.clone()).passed
    assert grade("test-grad-mode", lambda x: seen.append(torch.is_grad_enabled()) or x.clone()).passed
    assert seen == [False, True]


@pytest.mark.parametrize("label", LABELS)
def test_solution_code_is_shown_in_the_solution_block(label):
    path, cells = CODING[label]
    solution_code = cells["solution"].source.strip()
    nb = nbformat.read(path, as_version=4)
    blocks = [c.source for c in nb.cells if c.cell_type == "markdown" and f"{{solution}} {label}" in c.source]
    assert len(blocks) == 1 and solution_code in blocks[0], "the solution block shows the solution cell's code"
    assert "remove-input" in editions.tags(cells["solution"]), "the rendered book hides the solution cell"


@pytest.mark.parametrize("label", LABELS)
def test_checkers_run_on_every_device(label, any_device):
    solution = _function(CODING[label][1]["solution"].source)
    result = grade(label, solution, device=any_device)
    assert result.passed, result.message
    assert result.message.endswith(f"on {any_device.type}.")


@pytest.mark.gpu
@pytest.mark.parametrize("label", LABELS)
def test_checkers_catch_results_left_on_the_cpu(label, gpu_device):
    solution = _function(CODING[label][1]["solution"].source)

    def on_cpu(*args, **kwargs):
        return solution(*args, **kwargs).cpu()

    message = grade(label, on_cpu, device=gpu_device).message
    assert f"expected a tensor on {gpu_device.type}" in message


def test_low_rank_checker_names_the_case_of_a_truncation_without_the_svd():
    def first_rows(queries, keys, W_a, rank):  # keeps the first rows of W_a, not its largest singular values
        W = W_a.clone()
        W[rank:] = 0
        return queries @ W @ keys.transpose(1, 2)

    message = grade("ch03-low-rank-general", first_rows).message
    assert "Case 'by hand: W_a = diag(1, 3), rank 1 keeps 3 on the second axis" in message

    def without_singular_values(queries, keys, W_a, rank):  # U_r V_r^T: forgets diag(S)
        U, S, Vh = torch.linalg.svd(W_a, full_matrices=False)
        return queries @ (U[:, :rank] @ Vh[:rank]) @ keys.transpose(1, 2)

    assert "expected [[[0.0, 0.0], [3.0, -3.0]]]" in grade("ch03-low-rank-general", without_singular_values).message


# --- the dtype of a result, and the time limit (issue 37) --------------------------------------------------------


def _one_case(monkeypatch, expected: torch.Tensor, label: str = "test-dtype"):
    from attn_utils.exercises import core

    cases = [core.Case("a one-hot row", (torch.tensor([0.1, 3.0, 0.2]),), expected)]
    monkeypatch.setitem(core.REGISTRY, label, lambda device: cases)
    return label


def test_a_result_of_another_kind_of_number_fails_naming_both_dtypes(monkeypatch):
    """Before: every result was compared after .double(), so an int64 one-hot passed for float32 probabilities,
    a complex tensor passed on its real part (the imaginary part was dropped), a float answer passed for indices."""
    label = _one_case(monkeypatch, torch.tensor([0.0, 1.0, 0.0]))  # float32 probabilities that happen to be 0/1

    def one_hot(x):  # right values, integers
        return torch.nn.functional.one_hot(x.argmax(), 3)

    result = grade(label, one_hot)
    assert not result.passed
    assert "expected dtype float32 (floating-point), got int64 (integer): integers where real numbers" in result.message
    with pytest.raises(ExerciseFailed, match=r"expected dtype float32 \(floating-point\), got int64"):
        check_exercise(label, one_hot)

    def complex_result(x):  # the right real part, and an imaginary part the old check never saw
        return torch.softmax(x * 100, dim=-1) + 5j

    message = grade(label, complex_result).message
    assert "expected dtype float32 (floating-point), got complex64 (complex): a complex result" in message

    label = _one_case(monkeypatch, torch.tensor([1, 2, 0]), "test-indices")

    def float_indices(x):
        return torch.tensor([1.0, 2.0, 0.0], device=x.device)

    assert "expected dtype int64 (integer), got float32 (floating-point): indices and counts are integers" in \
        grade(label, float_indices).message


def test_a_less_precise_result_fails(monkeypatch):
    """Before: a float16 answer to a float32 exercise passed with float16's looser tolerance."""
    label = _one_case(monkeypatch, torch.softmax(torch.tensor([0.1, 3.0, 0.2]), dim=-1))
    result = grade(label, lambda x: torch.softmax(x, dim=-1).half())
    assert not result.passed
    assert "expected dtype float32, got float16, which holds fewer digits" in result.message
    assert grade(label, lambda x: torch.softmax(x, dim=-1)).passed


def test_a_float64_answer_to_a_float32_exercise_passes_with_a_note(capsys):
    """A correct formula computed in float64 is right within float32's tolerance: it passes, and the reader sees
    a note (before: it passed silently, and the float64 result later met float32 weights)."""
    label = "ch01-write-soft-lookup"
    solution = _function(CODING[label][1]["solution"].source)

    def in_float64(*args, **kwargs):
        return solution(*args, **kwargs).double()

    result = grade(label, in_float64)
    assert result.passed and result.score == 1.0
    assert len(result.notes) == result.cases_total
    assert re.search(r"\nNote: case '.+' returned float64 where the cases expect float32; the values are right, "
                     r"so it passes, .*\(and \d+ more cases alike\)$", result.message), result.message
    check_exercise(label, in_float64)
    out = capsys.readouterr().out
    assert out.startswith(f"{label}: all ") and "Note: case" in out
    plain = grade(label, solution)  # the same dtype: no note, the line the notebooks store
    assert plain.notes == () and "Note" not in plain.message


def test_an_infinite_timeout_means_no_limit():
    """Before: timeout=inf reached Thread.join, which raised OverflowError, reported as the case failing."""
    label = "ch01-write-soft-lookup"
    solution = _function(CODING[label][1]["solution"].source)
    for timeout in (float("inf"), 1e300):
        result = grade(label, solution, timeout=timeout)
        assert result.passed, result.message
    for bad in (True, float("nan"), "60", -1):
        with pytest.raises(ValueError, match=r"timeout must be a positive number of seconds, or None or inf for no "
                                             rf"limit, got {re.escape(repr(bad))}"):
            grade(label, solution, timeout=bad)


def test_a_device_that_does_not_exist_is_named():
    with pytest.raises(ValueError, match=r"device must be a torch.device or a name such as 'cpu' or 'cuda', "
                                         r"got 'gpu'"):
        grade("ch01-write-soft-lookup", lambda *a: None, device="gpu")
