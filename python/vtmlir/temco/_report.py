"""Where TeMCO passes write their reports (`output` option: '-' stderr, 'none', or a path)."""

from __future__ import annotations

import sys


def write_report(pass_, module, text: str) -> None:
    """Write a report where the pass's `output` option says (shared by the TeMCO passes)."""
    if pass_.output == "none":
        return
    if pass_.output in ("", "-"):
        sys.stderr.write(text)
        sys.stderr.flush()
        return
    try:
        with open(pass_.output, "w") as f:
            f.write(text)
    except OSError as err:
        pass_.emit_error(module, f"{pass_.name}: cannot write '{pass_.output}': {err.strerror}")
