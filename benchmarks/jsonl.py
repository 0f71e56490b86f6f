"""What every benchmark script shares: the JSON-lines record (DESIGN.md §7) and a median timer."""

from __future__ import annotations

import json
import statistics
import time


def median_time(fn, repeat: int) -> float:
    """Median wall time of `repeat` calls of `fn` (seconds), after one untimed warm-up call."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


class Reporter:
    """Prints one JSON object per line: suite, case, metric, value, unit, baseline (+ extra keys)."""

    def __init__(self, suite: str):
        self.suite = suite

    def emit(self, case, metric, value, unit, baseline=None, **extra) -> None:
        record = {"suite": self.suite, "case": case, "metric": metric, "value": value, "unit": unit,
                  "baseline": baseline, **extra}
        print(json.dumps(record), flush=True)
