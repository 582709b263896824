"""Downloading a file into the cache (``paths.default_cache_dir``): checksum verified, written atomically.

A download goes to a temporary file in the cache folder and is moved into place
(``os.replace``) only once its SHA-1 matches, so an interrupted or wrong download leaves
nothing behind. A cached file is checked again before it is used.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import urllib.request
from pathlib import Path

from .paths import default_cache_dir

CHUNK = 1 << 20


class DownloadError(OSError):
    """The file could not be fetched (offline, server error) or its checksum was wrong."""


def sha1_of(path: str | os.PathLike) -> str:
    """Hex SHA-1 of a file's bytes (``path``: a string or a path)."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a string or a path, got {type(path).__name__} {path!r:.40}")
    digest = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(url: str, timeout: float = 30.0):
    """Open ``url`` for reading (a file-like object); tests replace this to simulate the network."""
    return urllib.request.urlopen(url, timeout=timeout)  # plain http is what d2l's hub serves


def download(url: str, sha1: str, cache_dir: str | os.PathLike | None = None, filename: str | None = None,
             timeout: float = 30.0) -> Path:
    """Return the cached copy of ``url``, downloading it first if it is missing or its SHA-1 is wrong.

    Raises ``DownloadError`` when the file cannot be fetched or the downloaded bytes do not have
    SHA-1 ``sha1``; in both cases nothing is left in the cache. ``url``, ``sha1`` and ``filename`` are
    strings, ``cache_dir`` a string or a path, ``timeout`` seconds (a finite number > 0).
    """
    for name, value in (("url", url), ("sha1", sha1)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must be a non-empty string, got {value!r:.60}")
    if filename is not None and (not isinstance(filename, str) or not filename):
        raise ValueError(f"filename must be a non-empty string or None, got {filename!r:.60}")
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise ValueError(f"cache_dir must be a string, a path or None, got {type(cache_dir).__name__}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = cache_dir / (filename or url.rsplit("/", 1)[-1])
    if path.is_file() and sha1_of(path) == sha1:
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=cache_dir, prefix=f".{path.name}.", suffix=".part")
    try:
        digest = hashlib.sha1()
        with os.fdopen(fd, "wb") as out:
            try:
                with fetch(url, timeout=timeout) as response:
                    for chunk in iter(lambda: response.read(CHUNK), b""):
                        digest.update(chunk)
                        out.write(chunk)
            except (OSError, http.client.HTTPException) as err:  # URLError, HTTPError, timeouts, refusals
                raise DownloadError(f"could not download {url}: {getattr(err, 'reason', None) or err}") from err
        if digest.hexdigest() != sha1:
            raise DownloadError(f"{url} has the wrong SHA-1: expected {sha1}, got {digest.hexdigest()}; "
                                "nothing was saved")
        os.replace(tmp_name, path)
    finally:
        if os.path.exists(tmp_name):
            os.remove(tmp_name)
    return path
