"""The setup cell's three paths, run against a local clone of this repository, without network.

The code run is the cell's own (``notebook_setup.setup_cell_source``, the template every notebook
holds) with ``REPOSITORY`` set to the ``file://`` URL of a temporary ``git clone`` of this repository,
tagged ``v<version>`` or not. pip is replaced by a stand-in for ``subprocess.run`` that records each
requirement the cell asks for and answers as pip does: it looks the requested git ref up in that
clone with git, and writes pip's error to the output unless the cell captured it. The paths:

(a) attn_utils installed at BOOK_VERSION: nothing is installed (and the repository is not needed);
(b) the tag is in the repository: attn_utils is installed from the tag, and the cell says so;
(c) the tag is missing: the cell falls back to the main branch with a one-line warning, and none of
    pip's error reaches the output.

One more test runs (c) end to end with the real pip, as ``pip download`` (the same resolution of the
git ref in the clone, the same errors, without installing anything into this environment).
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import attn_utils  # imported here, so that the cell's own import is not the first one
from tools import notebook_setup

ROOT = Path(__file__).resolve().parents[1]
VERSION = notebook_setup.package_version()
TAG = f"v{VERSION}"
REAL_RUN = subprocess.run  # the stand-ins reach git (and pip) through this, whatever is patched
PIP_INSTALL = [sys.executable, "-m", "pip", "install", "-q", "--upgrade"]
# What pip 23 writes to stderr for a ref that is not in the repository (abridged).
PIP_ERROR = (
    f"  WARNING: Did not find branch or tag '{TAG}', assuming revision or ref.\n"
    "  error: subprocess-exited-with-error\n"
    f"  × git checkout -q {TAG} did not run successfully.\n"
    "  │ exit code: 1\n"
    f"  ╰─> error: pathspec '{TAG}' did not match any file(s) known to git\n"
)

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a git checkout"
)


def _url(path: Path) -> str:
    """The ``file://`` URL of a local repository, with a host: pip 23's requirement parser rejects
    ``git+file:///path`` (no host), and git reads ``file://localhost/path`` as ``/path``."""
    return f"file://localhost{path}"


def _git(*args: str) -> subprocess.CompletedProcess:
    return REAL_RUN(["git", *args], capture_output=True, text=True)


@pytest.fixture
def clone(tmp_path) -> Path:
    """A ``git clone`` of this repository without the tag ``v<version>`` (a clone copies tags)."""
    path = tmp_path / "repository"
    result = _git("clone", "--quiet", str(ROOT), str(path))
    assert result.returncode == 0, result.stderr
    _git("-C", str(path), "tag", "--delete", TAG)  # fails harmlessly where there is none
    assert _git("-C", str(path), "tag", "--list", TAG).stdout == ""
    return path


def _tag(path: Path) -> None:
    result = _git("-C", str(path), "tag", TAG)
    assert result.returncode == 0, result.stderr


class FakePip:
    """``subprocess.run`` for the cell: pip install, answered from the repository that a requirement
    ``attn_utils @ git+<url>[@<ref>]`` names (the ref, or the default branch, must be in it)."""

    def __init__(self):
        self.requirements: list[str] = []

    def __call__(self, command, *, capture_output=False, check=False, **kwargs):
        assert command[:-1] == PIP_INSTALL, f"not the cell's pip command: {command}"
        requirement = command[-1]
        self.requirements.append(requirement)
        prefix = "attn_utils @ git+"
        assert requirement.startswith(prefix), requirement
        url, _, ref = requirement[len(prefix):].partition("@")
        found = _git("ls-remote", "--exit-code", url, ref or "HEAD").returncode == 0
        captured = capture_output or kwargs.get("stderr") is not None
        if found:
            return subprocess.CompletedProcess(command, 0, b"" if captured else None, b"" if captured else None)
        if not captured:  # what a child process writes to the notebook's output
            sys.stderr.write(PIP_ERROR)
        if check:
            raise subprocess.CalledProcessError(1, command)
        return subprocess.CompletedProcess(
            command, 1, b"" if captured else None, PIP_ERROR.encode() if captured else None
        )


def run_cell(monkeypatch, url: str, installed: str | None, run) -> dict:
    """Execute the setup cell with REPOSITORY = ``url``, ``installed`` as the installed attn_utils
    (None: not installed) and ``run`` as ``subprocess.run``; returns the cell's namespace."""
    real_version = importlib.metadata.version

    def version(name):
        if name != "attn_utils":
            return real_version(name)
        if installed is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed

    namespace: dict = {}
    with monkeypatch.context() as patch:
        patch.setattr(importlib.metadata, "version", version)
        patch.setattr(subprocess, "run", run)
        exec(notebook_setup.setup_cell_source(url=url), namespace)
    return namespace


def _last_line(namespace: dict) -> str:
    return f"attn_utils {attn_utils.__version__} on {namespace['device']}"


def test_the_cell_under_test_is_the_notebooks_cell():
    url = notebook_setup.repository_url()
    assert notebook_setup.setup_cell_source(url=url) == notebook_setup.setup_cell_source()
    assert notebook_setup.setup_cell_source(url="file:///x").replace("file:///x", url) == (
        notebook_setup.setup_cell_source()
    )


def test_the_pip_stand_in_shows_pips_error_unless_it_is_captured(clone, capsys):
    """The check of path (c) means something: an uncaptured failing install does print pip's error."""
    pip = FakePip()
    missing = f"attn_utils @ git+{_url(clone)}@{TAG}"
    assert pip(PIP_INSTALL + [missing]).returncode == 1
    assert "error: subprocess-exited-with-error" in capsys.readouterr().err
    assert pip(PIP_INSTALL + [missing], capture_output=True).stderr == PIP_ERROR.encode()
    assert capsys.readouterr().err == ""
    _tag(clone)
    assert pip(PIP_INSTALL + [missing]).returncode == 0
    assert pip.requirements == [missing] * 3


def test_a_the_books_version_already_installed_installs_nothing(tmp_path, monkeypatch, capsys):
    # A repository that does not exist: the cell must not need it (offline, or the book's own build).
    pip = FakePip()
    namespace = run_cell(monkeypatch, _url(tmp_path / "nowhere"), VERSION, pip)
    assert pip.requirements == []
    out, err = capsys.readouterr()
    assert out.splitlines() == [_last_line(namespace)]
    assert err == ""


@pytest.mark.parametrize("installed", [None, "0.0.1"])
def test_b_a_tag_in_the_repository_is_installed(clone, monkeypatch, capsys, installed):
    _tag(clone)
    url = _url(clone)
    pip = FakePip()
    namespace = run_cell(monkeypatch, url, installed, pip)
    assert pip.requirements == [f"attn_utils @ git+{url}@{TAG}"]
    out, err = capsys.readouterr()
    replaced = "" if installed is None else f" in place of version {installed}"
    assert out.splitlines() == [f"installed attn_utils {VERSION} (tag {TAG} of {url}){replaced}", _last_line(namespace)]
    assert err == ""


def test_c_a_missing_tag_falls_back_to_main_with_one_line_and_no_pip_error(clone, monkeypatch, capsys):
    url = _url(clone)
    pip = FakePip()
    namespace = run_cell(monkeypatch, url, None, pip)
    assert pip.requirements == [f"attn_utils @ git+{url}@{TAG}", f"attn_utils @ git+{url}"]
    out, err = capsys.readouterr()
    warning = (f"WARNING: tag {TAG} is not in {url}; installed its main branch instead, which may differ "
               "from this page")
    assert out.splitlines() == [warning, _last_line(namespace)]
    assert err == ""
    assert "error" not in (out + err).replace(url, "").lower()


def test_c_a_failing_fallback_shows_pips_error_and_no_warning(tmp_path, monkeypatch, capsys):
    """Only the expected failure is kept back: where the main branch cannot be installed either (here,
    no repository at all), pip's error is shown and the cell stops."""
    url = _url(tmp_path / "nowhere")
    pip = FakePip()
    with pytest.raises(subprocess.CalledProcessError):
        run_cell(monkeypatch, url, None, pip)
    assert pip.requirements == [f"attn_utils @ git+{url}@{TAG}", f"attn_utils @ git+{url}"]
    out, err = capsys.readouterr()
    assert "WARNING" not in out
    assert err == PIP_ERROR  # once: the fallback's, not the tag's


def test_c_end_to_end_with_the_real_pip(clone, tmp_path, monkeypatch, capfd):
    """Path (c) with the real pip on the clone: each of the cell's ``pip install`` commands is run as
    ``pip download`` (offline: no index, no build isolation, no dependencies) into a folder."""
    url = _url(clone)
    downloads = tmp_path / "downloads"
    results = []

    def pip_download(command, **kwargs):
        assert command[:-1] == PIP_INSTALL, command
        download = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", "-d", str(downloads), command[-1]]
        results.append(REAL_RUN(download, **kwargs))
        return results[-1]

    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("PIP_NO_INPUT", "1")
    namespace = run_cell(monkeypatch, url, None, pip_download)
    assert [r.args[-1] for r in results] == [f"attn_utils @ git+{url}@{TAG}", f"attn_utils @ git+{url}"]
    assert results[0].returncode != 0 and b"error: subprocess-exited-with-error" in results[0].stderr  # kept back
    assert results[1].returncode == 0
    assert [p.name for p in downloads.iterdir()] == [f"attn_utils-{VERSION}.zip"]
    out, err = capfd.readouterr()
    assert out.splitlines() == [
        f"WARNING: tag {TAG} is not in {url}; installed its main branch instead, which may differ from this page",
        _last_line(namespace),
    ]
    assert "error" not in (out + err).replace(url, "").lower(), err
