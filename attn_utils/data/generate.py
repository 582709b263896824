"""Write (or check) the bundled corpora's snapshots.

    python -m attn_utils.data.generate            # rewrite data/*.tsv in the repository
    python -m attn_utils.data.generate --out DIR  # write them into DIR instead
    python -m attn_utils.data.generate --check    # exit 1 if a snapshot differs from a fresh run
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .bundled import BUNDLED, bundled_text, repository_data_dir


def write_snapshots(out_dir: Path) -> list[Path]:
    """Generate every bundled corpus into ``out_dir`` (a string or a path); return the paths written."""
    out_dir = _folder(out_dir, "out_dir")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, spec in BUNDLED.items():
        path = out_dir / spec.filename
        path.write_bytes(bundled_text(name).encode("utf-8"))
        written.append(path)
    return written


def check_snapshots(data_dir: Path) -> list[str]:
    """Names of the snapshots in ``data_dir`` (a string or a path) that are missing or differ from a fresh
    generation."""
    data_dir = _folder(data_dir, "data_dir")
    return [spec.filename for name, spec in BUNDLED.items()
            if not (Path(data_dir) / spec.filename).is_file()
            or (Path(data_dir) / spec.filename).read_bytes() != bundled_text(name).encode("utf-8")]


def _folder(value, name: str) -> Path:
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{name} must be a string or a path, got {type(value).__name__} {value!r:.40}")
    return Path(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder to write into (default: the repository's data/)")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    target = args.out or repository_data_dir()
    if target is None:
        parser.error("no repository data/ folder found here; pass --out DIR")
    if args.check:
        stale = check_snapshots(target)
        for filename in stale:
            print(f"{filename}: differs from a fresh generation (run python -m attn_utils.data.generate)")
        return 1 if stale else 0
    for path in write_snapshots(target):
        print(f"wrote {path.name} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
