"""Where the repository's ``data/`` folder and the download cache are.

The cache is ``data/cache/`` of the repository when the package runs from a checkout (an
editable install, as ``make`` makes; the folder is git-ignored), otherwise a per-user folder:
``$XDG_CACHE_HOME/attn_utils`` (default ``~/.cache/attn_utils``), or
``%LOCALAPPDATA%\\attn_utils\\cache`` on Windows. ``cache_dir=`` arguments override it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def repository_root() -> Path | None:
    """The repository this package runs from (editable install or checkout), else ``None``."""
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "data").is_dir() and (root / "attn_utils").is_dir():
        return root
    return None


def repository_data_dir() -> Path | None:
    """The repository's ``data/`` folder, or ``None`` when the package runs without the repository."""
    root = repository_root()
    return None if root is None else root / "data"


def default_cache_dir() -> Path:
    """Where downloads are kept (see the module docstring)."""
    data_dir = repository_data_dir()
    if data_dir is not None:
        return data_dir / "cache"
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "attn_utils" / "cache"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "attn_utils"
