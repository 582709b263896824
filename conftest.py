"""Every pytest run (unit tests, notebooks through nbval, the editions) uses the quick budget by default.

``ATTN_UTILS_QUICK=1`` unless the environment says otherwise: notebooks train at a smoke size that
still runs every code path. A notebook cell tagged ``budget-dependent`` prints numbers that depend
on the training budget; nbval compares it with the stored (book-budget) output only when the run
itself uses the book budget (``ATTN_UTILS_QUICK=0 pytest --nbval-lax chapters/...``).
"""

from __future__ import annotations

import os

from attn_utils.budgets import QUICK_ENV_VAR, quick_mode

os.environ.setdefault(QUICK_ENV_VAR, "1")  # before nbval starts a kernel, which inherits the environment
BUDGET_DEPENDENT_TAG = "budget-dependent"


def pytest_collection_modifyitems(items):
    """At the quick budget, nbval does not compare the outputs of cells tagged ``budget-dependent``."""
    if not quick_mode():
        return
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is not None and BUDGET_DEPENDENT_TAG in cell.get("metadata", {}).get("tags", []):
            item.options["check"] = False
