"""Which bytecode template compiled each shape, counted while a `coverage()` block is active.

`template.py` counts its Python-path compiles, `native_fill.py` the native ones; on exit each template
set is reordered so that the templates covering the most shapes are tried first (`TemplateSet.order_by`).
"""

from __future__ import annotations

import contextlib


COVERAGE: list[dict] = []  # the counters of the active `coverage()` blocks


@contextlib.contextmanager
def coverage():
    """While active, count which template every compile uses; on exit, order each template set
    used so that the templates covering the most shapes come first (`TemplateSet.order_by`): the
    generated `fill` tries them in order. `prebuild` and `DvmFunction.prebuild` walk their shape
    spaces inside one."""
    hits: dict = {}
    COVERAGE.append(hits)
    try:
        yield hits
    finally:
        COVERAGE.remove(hits)
        for tset, counts in hits.items():
            tset.order_by(counts)


def record_hit(tset, index: int) -> None:
    for hits in COVERAGE:
        counts = hits.setdefault(tset, {})
        tmpl = tset.templates[index]
        counts[tmpl] = counts.get(tmpl, 0) + 1
