"""tools.format_notebooks: a trailing comment that would split its statement goes on its own line above it."""

import ast
import subprocess
import sys
import textwrap

from tools.format_notebooks import RUFF_CONFIG, comments_above, line_length


def _ruff(source: str) -> str:
    done = subprocess.run([sys.executable, "-m", "ruff", "format", "--config", str(RUFF_CONFIG), "-"], input=source,
                          capture_output=True, text=True, check=True)
    return done.stdout


def _format(source: str) -> str:
    """What ``make format`` does to a cell: move the comments, then ruff."""
    return _ruff(comments_above(textwrap.dedent(source), 88))


def test_a_split_expression_rejoins_under_its_comment():
    # ruff's own output for a one-liner with a long shape comment (chapter 6's luong_scores)
    split = """\
    def luong_scores(enc, h_t):
        return (enc @ h_t.unsqueeze(-1)).squeeze(
            -1
        )  # (batch, src, h) @ (batch, h, 1) -> (batch, src)
    """
    assert _format(split) == textwrap.dedent("""\
    def luong_scores(enc, h_t):
        # (batch, src, h) @ (batch, h, 1) -> (batch, src)
        return (enc @ h_t.unsqueeze(-1)).squeeze(-1)
    """)


def test_headers_split_for_a_comment_rejoin_and_lose_the_trailing_comma():
    split = """\
    def my_causal_weights(
        scores,
    ):  # scores (..., n, n) -> weights with nothing above the diagonal
        with (
            torch.no_grad()
        ):  # gamma and beta away from 1 and 0, so that the check checks them too
            pass
    """
    assert _format(split) == textwrap.dedent("""\
    # scores (..., n, n) -> weights with nothing above the diagonal
    def my_causal_weights(scores):
        # gamma and beta away from 1 and 0, so that the check checks them too
        with torch.no_grad():
            pass
    """)


def test_a_long_one_liner_gets_its_comment_above_instead_of_being_split():
    line = "weights = torch.softmax(scores.masked_fill(~mask, float('-inf')), dim=-1)  # (batch, queries, keys)\n"
    assert len(line) > line_length()
    assert _format(line) == ('# (batch, queries, keys)\n'
                             'weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)\n')


def test_what_stays_where_it_is():
    source = textwrap.dedent("""\
    import math  # noqa: F401 (used by the solutions)
    x = f(a)  # short enough: stays
    y = g(
        first,  # one comment per element
        second,
    )
    t = (
        1,
    )  # a one-element tuple keeps its comma
    rows = [  # fmt: skip
        1, 2,
    ]
    """)
    moved = comments_above(source, 88)
    assert ast.dump(ast.parse(moved)) == ast.dump(ast.parse(source))
    lines = moved.splitlines()
    assert lines[0] == "import math  # noqa: F401 (used by the solutions)"
    assert lines[1] == "x = f(a)  # short enough: stays"
    assert "    first,  # one comment per element" in lines
    assert "# a one-element tuple keeps its comma" in lines and "    1," in lines
    assert "rows = [  # fmt: skip" in lines
    assert comments_above(moved, 88) == moved  # once is enough


def test_a_cell_that_does_not_parse_is_left_alone():
    source = "%timeit f(x)  # an IPython magic\n"
    assert comments_above(source, 10) == source


def test_python_in_the_prose_is_formatted_like_a_cell_and_other_blocks_are_left_alone(tmp_path):
    import nbformat

    from tools.format_notebooks import format_prose_blocks

    long_call = ("model, _ = attn_utils.train_recipe('no attention', reversed_data, max_steps=TRAINING_STEPS, "
                 "eval_points=0)  # the same recipe\n")
    broken = "for x in\n"  # does not parse: left as it is
    shell = "python benchmarks/bench_fast_attention.py --device cuda --out benchmarks/results/a_long_name.json\n"
    source = f"Text.\n\n```python\n{long_call}```\n\n```python\n{broken}```\n\n```bash\n{shell}```\n"
    path = tmp_path / "page.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(source)]), path)
    assert format_prose_blocks(path, write=False) and nbformat.read(path, as_version=4).cells[0].source == source
    assert format_prose_blocks(path)
    new = nbformat.read(path, as_version=4).cells[0].source
    block = new.split("```python\n")[1].split("```")[0]
    assert block == ("# the same recipe\n"
                     "model, _ = attn_utils.train_recipe(\n"
                     '    "no attention", reversed_data, max_steps=TRAINING_STEPS, eval_points=0\n'
                     ")\n")
    assert ast.dump(ast.parse(block)) == ast.dump(ast.parse(long_call))
    assert f"```python\n{broken}```" in new and f"```bash\n{shell}```" in new
    assert not format_prose_blocks(path)  # formatting again changes nothing
