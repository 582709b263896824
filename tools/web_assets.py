"""Put the scripts and the stylesheet the book needs into the build, so the site reads without a network.

Built as it comes, a Jupyter Book page loads MathJax and the Jupyter widget manager from CDNs;
offline, its math stays raw TeX and its saved widgets stay blank. ``make web-assets`` installs
both from the npm registry (versions pinned in ``tools/web/package-lock.json``) and this script
copies what the pages load into ``_build/web_assets``, which ``_config.yml`` lists as a static
path (``mathjax_path`` and ``nb_ipywidgets_js`` point there):

    _build/web_assets/mathjax/   MathJax 3's ``es5`` folder (tex-mml-chtml.js, its fonts and extensions)
    _build/web_assets/widgets/   require.js (RequireJS), @jupyter-widgets/html-manager's ``dist`` folder and
                                 offline-widgets.js (the course's own: fonts and MathJax for the widgets)
    _build/web_assets/course.css the course's own styles (code that fits its box; ``html_css_files``)

    python -m tools.web_assets           # copy (after ``npm ci --prefix tools/web``)
    python -m tools.web_assets --check   # exit 1 naming any file a page would miss
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from tools.notebook_setup import ROOT

NODE_MODULES = ROOT / "tools" / "web" / "node_modules"
TARGET = ROOT / "_build" / "web_assets"

# (source inside node_modules, destination inside _build/web_assets); folders are copied whole.
COPIES = [
    ("mathjax/es5", "mathjax"),
    ("@jupyter-widgets/html-manager/dist", "widgets"),
    ("requirejs/require.js", "widgets/require.js"),
]
# The course's own script, from tools/web (see its comments): local fonts for the widget manager and
# a MathJax 2 ``Hub.Queue`` for its labels, forwarded to MathJax 3.
OWN_FILES = [("offline-widgets.js", "widgets/offline-widgets.js"), ("course.css", "course.css")]
# What the pages load, relative to the static folder (see _config.yml).
ENTRY_POINTS = ["mathjax/tex-mml-chtml.js", "widgets/require.js", "widgets/offline-widgets.js", "widgets/embed-amd.js",
                "course.css"]


def missing(target: Path = TARGET) -> list[str]:
    """The entry points not present under ``target``."""
    return [name for name in ENTRY_POINTS if not (target / name).is_file()]


def copy(node_modules: Path = NODE_MODULES, target: Path = TARGET) -> None:
    for source, destination in COPIES:
        src, dst = node_modules / source, target / destination
        if not src.exists():
            raise SystemExit(f"{src.relative_to(ROOT)} is missing: run `npm ci --prefix tools/web` "
                             "(or `make web-assets`) first")
        if dst.exists():
            shutil.rmtree(dst) if dst.is_dir() else dst.unlink()
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.map", "*.LICENSE.txt"))
        else:
            shutil.copy2(src, dst)
    for source, destination in OWN_FILES:
        shutil.copy2(ROOT / "tools" / "web" / source, target / destination)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the entry points are in place")
    args = parser.parse_args(argv)
    if not args.check:
        copy()
    gone = missing()
    if gone:
        print("missing from _build/web_assets:", ", ".join(gone), file=sys.stderr)
        return 1
    print(f"web assets in place: {', '.join(ENTRY_POINTS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
