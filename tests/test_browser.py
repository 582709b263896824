"""The built book in a real browser: Debian's Chromium, driven by Playwright, with the network cut.

``make test`` builds the book first; this file then serves ``_build/html`` on localhost and opens
every page in headless Chromium. Every request that leaves localhost is refused and recorded, so
each check below also holds for a reader without a network. Checked on every page:

* no JavaScript error (uncaught exceptions and ``console.error``);
* no request for anything outside the book (MathJax and the widget manager come from the build);
* math typeset by MathJax: every ``.math`` element holds MathJax output, no TeX error, and no raw
  ``\\(``, ``\\[`` or ``$$`` left in the prose;
* every image loads and decodes;
* every internal link points at a file of the build, and every ``#anchor`` at an element there;
* on every notebook page, a Colab launch button that opens that notebook's path in the repository;
* where a page holds saved widget state, every widget view is rendered from it;
* at a 1280-pixel window, no code cell is wider than its box (nothing scrolls sideways), and the smallest
  label of every diagram of ``attn_utils.diagrams`` reads at 80 % of the body text or more, at the size
  the page shows its image.

Screenshots of chapter 1 and of the widgets on chapters 1 and 10 are written to
``_build/screenshots/``. A second test opens pages from ``file://`` in a browser context that is
offline altogether and checks that math and widgets still render.

Chromium is Debian's (``make browser`` installs it); Playwright never downloads a browser here.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import matplotlib.text
import pytest
import yaml
from matplotlib import pyplot as plt
from PIL import Image

from attn_utils import diagrams

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHAPTER_1 = "chapters/part1_intuition/01_attention_cues"
WIDGET_PAGES = [CHAPTER_1, "chapters/part3_transformer/10_transformer"]
VIEW_SELECTOR = 'script[type="application/vnd.jupyter.widget-view+json"]'
STATE_SELECTOR = 'script[type="application/vnd.jupyter.widget-state+json"]'
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--disable-quic"]


DIAGRAMS = sorted(name for name in dir(diagrams) if name.startswith("draw_"))
SMALLEST_LABEL = 0.8  # of the body text, as tests/test_diagrams.py holds it at the column's width


def _chromium() -> str:
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("Debian's chromium is not installed: run `make browser` (apt-get install chromium)")
    return found


def _pages() -> list[str]:
    """Every HTML page of the build, as Sphinx page names (``chapters/.../01_attention_cues``)."""
    skip = {"_static", "_sources", "_images", "_downloads"}
    return sorted(str(p.relative_to(BUILD).with_suffix("")) for p in BUILD.rglob("*.html")
                  if not skip & set(p.relative_to(BUILD).parts))


def _redirect_target(name: str) -> str | None:
    """Where a page that only redirects (``<meta http-equiv="Refresh" content="0; url=...">``) points."""
    html = (BUILD / f"{name}.html").read_text(encoding="utf-8", errors="replace")[:2000]
    match = re.search(r'http-equiv="refresh"\s+content="\d+;\s*url=([^"]+)"', html, re.IGNORECASE)
    return match.group(1) if match else None


def _colab_url(notebook: str) -> str:
    repository = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]
    owner_repo = urlsplit(repository["url"]).path.strip("/")
    return f"https://colab.research.google.com/github/{owner_repo}/blob/{repository.get('branch', 'main')}/{notebook}"


@dataclass
class PageReport:
    errors: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)
    math: dict = field(default_factory=dict)
    broken_images: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    colab: list[str] = field(default_factory=list)
    widgets: dict = field(default_factory=dict)
    layout: dict = field(default_factory=dict)


MATH_STATE = """() => {
  const maths = [...document.querySelectorAll('.math')];
  const prose = document.body.cloneNode(true);
  prose.querySelectorAll('pre, code, script, style, mjx-container, .highlight, .output').forEach(e => e.remove());
  const text = prose.innerText;
  return {
    elements: maths.length,
    typeset: maths.filter(m => m.querySelector('mjx-container') || m.tagName === 'MJX-CONTAINER').length,
    containers: document.querySelectorAll('mjx-container').length,
    tex_errors: [...document.querySelectorAll('mjx-merror')].map(e => e.textContent.slice(0, 80)),
    raw: ['\\\\(', '\\\\[', '$$'].filter(token => text.includes(token)),
  };
}"""

BROKEN_IMAGES = """async () => {
  const broken = [];
  for (const img of document.images) {
    const src = img.currentSrc || img.src;
    const probe = new Image();
    probe.src = src;
    try { await probe.decode(); if (!probe.naturalWidth) broken.push(src); } catch (e) { broken.push(src); }
  }
  return broken;
}"""

WIDGET_STATE = f"""() => {{
  const views = [...document.querySelectorAll('{VIEW_SELECTOR}')];
  return {{
    states: document.querySelectorAll('{STATE_SELECTOR}').length,
    views: views.length,
    rendered: views.filter(v => v.parentElement.querySelector('.jupyter-widgets')).length,
    sliders: document.querySelectorAll('.widget-slider').length,
  }};
}}"""

# Code cells (their boxes as shown), the body text's size, and each diagram's image: the diagram function its
# cell calls, the image's stored width and the width the page shows it at.
LAYOUT = """names => {
  const body = document.querySelector('.bd-article p');
  const code = [...document.querySelectorAll('div.cell_input pre')].filter(p => p.clientWidth > 0)
    .map(p => ({scroll: p.scrollWidth, client: p.clientWidth,
                longest: Math.max(...p.textContent.split('\\n').map(line => line.length)),
                first: p.textContent.trim().split('\\n')[0].slice(0, 60)}));
  const figures = [];
  for (const cell of document.querySelectorAll('div.cell')) {
    const input = cell.querySelector('.cell_input');
    const source = input ? input.textContent : '';
    const called = names.filter(name => new RegExp('\\\\b' + name + '\\\\(').test(source));
    const img = cell.querySelector('.cell_output img');
    if (called.length === 1 && img) {
      figures.push({name: called[0], natural: img.naturalWidth, shown: img.getBoundingClientRect().width});
    }
  }
  return {body: body ? parseFloat(getComputedStyle(body).fontSize) : null, code, figures};
}"""

ALL_VIEWS_RENDERED = f"""() => [...document.querySelectorAll('{VIEW_SELECTOR}')]
  .every(v => v.parentElement.querySelector('.jupyter-widgets'))"""


def _settle(page) -> None:
    """Wait for MathJax's first pass and for every saved widget view (each at most 30 s)."""
    page.wait_for_function("() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)", timeout=30_000)
    page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise.then(() => true) : true")
    with contextlib.suppress(Exception):  # a view that never renders is reported by the widget check
        page.wait_for_function(ALL_VIEWS_RENDERED, timeout=30_000)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site():
    """``_build/html`` served on a free localhost port; yields its base URL."""
    if not (BUILD / "index.html").is_file():
        pytest.fail("the book is not built: run `make book` (make test builds it before the tests)")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_QuietHandler, directory=str(BUILD)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in requirements-dev.txt")
    executable = _chromium()
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def crawl(site, browser) -> dict[str, PageReport]:
    """Open every page once (network cut), collect what the tests check, take the screenshots."""
    reports: dict[str, PageReport] = {}
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    current: list[PageReport] = []

    def route(request_route):
        url = request_route.request.url
        if url.startswith(site) or url.startswith("data:") or url.startswith("blob:"):
            request_route.continue_()
        else:
            current[-1].external.append(url)
            request_route.abort()

    context.route("**/*", route)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = context.new_page()
    page.on("pageerror", lambda error: current[-1].errors.append(f"uncaught: {error}"))
    page.on("console", lambda message: current[-1].errors.append(f"console: {message.text}")
            if message.type == "error" else None)
    for name in _pages():
        report = PageReport()
        current.append(report)
        reports[name] = report
        refresh = _redirect_target(name)
        if refresh is not None:  # index.html only sends the reader on: check where to
            report.links = [urljoin(site + name + ".html", refresh)]
            report.math = {"elements": 0, "typeset": 0, "containers": 0, "tex_errors": [], "raw": []}
            report.widgets = {"states": 0, "views": 0, "rendered": 0, "sliders": 0}
            report.layout = {"body": None, "code": [], "figures": []}
            continue
        page.goto(site + name + ".html", wait_until="load")
        _settle(page)
        report.math = page.evaluate(MATH_STATE)
        report.broken_images = page.evaluate(BROKEN_IMAGES)
        report.links = page.evaluate("() => [...document.querySelectorAll('a[href]')].map(a => a.href)")
        report.ids = set(page.evaluate(
            "() => [...document.querySelectorAll('[id], a[name]')].map(e => e.id || e.getAttribute('name'))"))
        report.colab = page.evaluate(
            "() => [...document.querySelectorAll('a[href*=\"colab.research.google.com\"]')].map(a => a.href)")
        report.widgets = page.evaluate(WIDGET_STATE)
        report.layout = page.evaluate(LAYOUT, DIAGRAMS)
        if name == CHAPTER_1:
            page.screenshot(path=str(SCREENSHOTS / "chapter-01.png"))
        if name in WIDGET_PAGES and report.widgets["sliders"]:
            page.locator(".widget-slider").first.scroll_into_view_if_needed()
            page.mouse.wheel(0, -250)  # the widget's title and figure above it in the picture
            page.wait_for_timeout(300)
            page.screenshot(path=str(SCREENSHOTS / f"{Path(name).name}-widget.png"))
    context.close()
    return reports


def _failures(reports: dict[str, PageReport], check) -> list[str]:
    found = []
    for name, report in reports.items():
        problem = check(name, report)
        if problem:
            found.append(f"{name}: {problem}")
    return found


def test_every_page_of_the_book_is_opened(crawl):
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = re.findall(r"file: (\S+)", yaml.safe_dump(toc)) + [toc["root"]]
    missing = [f for f in files if f not in crawl]
    assert not missing, f"pages in _toc.yml that the browser did not open: {missing}"
    assert len(crawl) >= len(files)


def test_no_javascript_errors(crawl):
    failures = _failures(crawl, lambda name, r: r.errors)
    assert not failures, "JavaScript errors:\n" + "\n".join(failures)


def test_no_page_needs_the_network(crawl):
    failures = _failures(crawl, lambda name, r: r.external)
    assert not failures, "requests that left the book (refused):\n" + "\n".join(failures)


def test_math_is_typeset_by_mathjax(crawl):
    def check(name, r):
        m = r.math
        problems = []
        if m["typeset"] != m["elements"]:
            problems.append(f"{m['elements'] - m['typeset']} of {m['elements']} math elements not typeset")
        if m["tex_errors"]:
            problems.append(f"TeX errors {m['tex_errors']}")
        if m["raw"]:
            problems.append(f"raw TeX delimiters {m['raw']} in the text")
        return "; ".join(problems)

    failures = _failures(crawl, check)
    assert not failures, "math not rendered:\n" + "\n".join(failures)
    # The chapters are full of math: make sure the check saw it.
    assert crawl["chapters/part1_intuition/02_attention_pooling"].math["containers"] > 20


def test_every_image_loads(crawl):
    failures = _failures(crawl, lambda name, r: r.broken_images)
    assert not failures, "images that did not load:\n" + "\n".join(failures)


def test_internal_links_and_anchors_resolve(crawl, site):
    def check(name, r):
        broken = []
        for href in r.links:
            if not href.startswith(site):
                continue
            url, fragment = urldefrag(href)
            path = unquote(url[len(site):].split("?")[0]) or "index.html"
            if path.endswith("/"):
                path += "index.html"
            if not (BUILD / path).is_file():
                broken.append(f"{href} (no file {path})")
                continue
            target = path[:-len(".html")] if path.endswith(".html") else None
            if fragment and target in crawl and unquote(fragment) not in crawl[target].ids:
                broken.append(f"{href} (no element #{fragment})")
        return sorted(set(broken))

    failures = _failures(crawl, check)
    assert not failures, "broken internal links:\n" + "\n".join(failures)


def test_every_notebook_page_has_a_colab_button_for_its_notebook(crawl):
    notebooks = [name for name in crawl if (BUILD / "_sources" / f"{name}.ipynb").is_file()]
    assert len(notebooks) >= 12, f"expected every chapter notebook to be a page, found {notebooks}"

    def check(name, r):
        if name not in notebooks:
            return None
        if not (ROOT / f"{name}.ipynb").is_file():
            return f"no notebook {name}.ipynb in the repository"
        expected = _colab_url(f"{name}.ipynb")
        return None if expected in r.colab else f"no Colab button for {expected} (found {r.colab})"

    failures = _failures(crawl, check)
    assert not failures, "Colab buttons:\n" + "\n".join(failures)


def test_saved_widget_state_is_rendered(crawl):
    def check(name, r):
        w = r.widgets
        if w["views"] and not w["states"]:
            return "widget views without saved widget state"
        if w["rendered"] != w["views"]:
            return f"{w['views'] - w['rendered']} of {w['views']} widget views not rendered"
        return None

    failures = _failures(crawl, check)
    assert not failures, "widgets:\n" + "\n".join(failures)
    for name in WIDGET_PAGES:  # the interactive explorers, not only progress bars
        assert crawl[name].widgets["sliders"] > 0, f"{name} shows no slider"


def test_screenshots_are_taken(crawl):
    for shot in ["chapter-01.png"] + [f"{Path(name).name}-widget.png" for name in WIDGET_PAGES]:
        path = SCREENSHOTS / shot
        assert path.is_file() and path.stat().st_size > 20_000, f"{path} missing or blank"


def test_math_and_widgets_render_with_the_network_cut_off(browser):
    """``file://`` pages in a context that is offline altogether: no server, no network."""
    if not (BUILD / "index.html").is_file():
        pytest.fail("the book is not built: run `make book`")
    context = browser.new_context(offline=True)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        for name in ["chapters/part1_intuition/02_attention_pooling", CHAPTER_1]:
            page.goto((BUILD / f"{name}.html").as_uri(), wait_until="load")
            _settle(page)
            math = page.evaluate(MATH_STATE)
            widgets = page.evaluate(WIDGET_STATE)
            assert math["elements"] > 0 and math["typeset"] == math["elements"], (name, math)
            assert not math["raw"] and not math["tex_errors"], (name, math)
            assert widgets["views"] > 0 and widgets["rendered"] == widgets["views"], (name, widgets)
    finally:
        context.close()
    assert not errors, errors


def test_no_code_cell_scrolls_sideways(crawl):
    """At a 1280-pixel window every code cell's lines fit its box (88 characters, chapters/ruff.toml, in
    the column and code font of tools/web/course.css)."""
    def check(name, r):
        wide = [c for c in r.layout["code"] if c["scroll"] > c["client"]]
        return "; ".join(f"{c['longest']} characters in {c['scroll']} px, box {c['client']} px ({c['first']!r})"
                         for c in wide)

    failures = _failures(crawl, check)
    assert not failures, "code cells wider than their box:\n" + "\n".join(failures)
    assert sum(len(r.layout["code"]) for r in crawl.values()) > 300, "the check saw the code cells"


def _label_points_and_width(name: str) -> tuple[float, int]:
    """The smallest label's size in points of diagram ``name`` and the width in pixels of its image as a
    notebook stores it (its dpi, cropped to the drawing)."""
    fig = getattr(diagrams, name)()
    try:
        points = min(t.get_fontsize() for t in fig.findobj(matplotlib.text.Text)
                     if t.get_visible() and t.get_text().strip())
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", bbox_inches="tight", dpi=fig.get_dpi())
        return points * fig.get_dpi() / 72, Image.open(buffer).size[0]
    finally:
        plt.close(fig)


def test_diagram_labels_read_at_80_percent_of_the_body_text(crawl):
    """Each diagram's image as the page shows it at a 1280-pixel window: its smallest label, scaled with the
    image, is at least 80 % of the body text. The stored image must be the figure as drawn now (its width)."""
    drawn = {name: _label_points_and_width(name) for name in DIAGRAMS}
    seen = set()

    def check(name, r):
        problems = []
        for figure in r.layout["figures"]:
            seen.add(figure["name"])
            pixels, width = drawn[figure["name"]]
            if abs(figure["natural"] - width) > 0.02 * width:  # another renderer may differ by a pixel
                problems.append(f"{figure['name']}: the stored image is {figure['natural']} px wide, the figure "
                                f"draws {width} px: re-run its cell (python -m tools.execute_cells)")
                continue
            label = pixels * figure["shown"] / figure["natural"]
            if label < SMALLEST_LABEL * r.layout["body"]:
                problems.append(f"{figure['name']}: smallest label {label:.1f} px against body text "
                                f"{r.layout['body']:.0f} px (image shown {figure['shown']:.0f} of "
                                f"{figure['natural']} px)")
        return "; ".join(problems)

    failures = _failures(crawl, check)
    assert not failures, "diagram labels:\n" + "\n".join(failures)
    assert seen == set(DIAGRAMS), f"diagrams on no page: {sorted(set(DIAGRAMS) - seen)}"
