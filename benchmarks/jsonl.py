"""What every benchmark script shares: the JSON-lines record (docs/design.md §7), a median timer and
`Fn`, a function as an `nn.Module` (what `vtmlir.compile` and `torch.compile` take)."""

from __future__ import annotations

import json
import statistics
import time

import torch


class Fn(torch.nn.Module):
    """`fn` as a module: `Fn(torch.matmul)(a, b)`."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


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


def torch_peak_bytes(fn) -> int:
    """The most bytes PyTorch's CPU allocator held at once for allocations made while `fn()` ran
    (its intermediates and results; tensors that existed before are not counted).

    This is PyTorch's own memory monitor (the profiler's allocation events carry the allocator's
    running total of the allocations it recorded), as VTC's Table 2 uses on the GPU."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    peak, stack = 0, list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
            peak = max(peak, node.extra_fields.total_allocated)
        stack.extend(node.children)
    return peak
