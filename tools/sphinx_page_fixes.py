"""A small Sphinx extension (listed under ``sphinx.local_extensions`` in ``_config.yml``) that fixes
two things the browser test (``tests/test_browser.py``) found in pages built by Jupyter Book 1.x:

* sphinx-thebe adds its inline configuration script once per read phase, so a page could declare
  ``const THEBE_JS_URL`` twice and raise a JavaScript error on load; each page keeps one copy of
  every script.
* The theme's colour-mode switch reads ``default_mode``, which Jupyter Book leaves empty; the
  theme then logs "invalid theme mode" on every page. It is set to ``auto`` (follow the system).
"""

from __future__ import annotations


def _script_key(script) -> tuple:
    """What a script does: its file, or its inline body (priorities may differ between copies)."""
    attributes = getattr(script, "attributes", {})
    return getattr(script, "filename", None) or "", attributes.get("body", ""), attributes.get("src", "")


def _tidy_page(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if scripts:
        seen, unique = set(), []
        for script in scripts:
            key = _script_key(script)
            if key not in seen:
                seen.add(key)
                unique.append(script)
        scripts[:] = unique
    if not context.get("default_mode"):
        context["default_mode"] = "auto"


def setup(app):
    app.connect("html-page-context", _tidy_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
