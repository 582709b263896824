"""The setup cell pins attn_utils to the version the book was built with, and says what it installed."""

from __future__ import annotations

import importlib.metadata
import subprocess

import pytest

from tools import notebook_setup


def run_setup_cell(monkeypatch, installed, tag_exists=True):
    """Execute the setup cell with ``installed`` as the installed version (None: not installed) and
    pip replaced by a recorder; returns the pip commands it ran."""
    calls = []

    def fake_version(name):
        assert name == "attn_utils"
        if installed is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed

    def fake_pip(command, check=False, **kwargs):
        calls.append(command)
        returncode = 1 if not tag_exists and "@v" in command[-1] else 0
        if check and returncode:
            raise subprocess.CalledProcessError(returncode, command)
        return subprocess.CompletedProcess(command, returncode)

    monkeypatch.setattr(importlib.metadata, "version", fake_version)
    monkeypatch.setattr(subprocess, "run", fake_pip)
    exec(notebook_setup.setup_cell_source(), {})
    return calls


def test_the_cell_pins_the_version_of_pyproject():
    version = notebook_setup.package_version()
    import attn_utils

    assert version == attn_utils.__version__
    assert f'BOOK_VERSION = "{version}"' in notebook_setup.setup_cell_source()


def test_the_right_version_installs_nothing(monkeypatch, capsys):
    assert run_setup_cell(monkeypatch, notebook_setup.package_version()) == []
    assert capsys.readouterr().out.startswith("attn_utils ")


@pytest.mark.parametrize("installed", [None, "0.0.1"])
def test_a_missing_or_other_version_installs_the_books_tag_and_says_so(monkeypatch, capsys, installed):
    version, url = notebook_setup.package_version(), notebook_setup.repository_url()
    calls = run_setup_cell(monkeypatch, installed)
    assert len(calls) == 1 and calls[0][-1] == f"attn_utils @ git+{url}@v{version}" and "--upgrade" in calls[0]
    out = capsys.readouterr().out
    assert f"installed attn_utils {version} (tag v{version} of {url})" in out
    assert ("in place of version 0.0.1" in out) == (installed is not None)


def test_a_missing_tag_falls_back_to_the_newest_code_with_a_warning(monkeypatch, capsys):
    calls = run_setup_cell(monkeypatch, None, tag_exists=False)
    assert [c[-1] for c in calls] == [f"attn_utils @ git+{notebook_setup.repository_url()}@v"
                                      f"{notebook_setup.package_version()}",
                                      f"attn_utils @ git+{notebook_setup.repository_url()}"]
    assert "WARNING: tag v" in capsys.readouterr().out
