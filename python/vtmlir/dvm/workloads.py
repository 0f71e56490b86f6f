"""DVM Table 2's operator workloads as DVM graphs (ranks only: every size is dynamic).

One definition for the benchmark (`benchmarks/dvm.py`) and the tests that compile, prebuild or
tile them: matmul `[m, k] @ [k, n]`, addmm `c + a @ b` with a full-size `c`, and LayerNorm over the
last dimension of a `[b, s, h]` input with per-channel weight and bias.
"""

from __future__ import annotations

from .graph import Graph


def matmul() -> Graph:
    g = Graph("matmul")
    g.output(g.matmul(g.input(2), g.input(2)))
    return g


def addmm() -> Graph:
    """Inputs (c, a, b): c [m, n], a [m, k], b [k, n]."""
    g = Graph("addmm")
    c, a, b = g.input(2), g.input(2), g.input(2)
    g.output(g.matmul(a, b) + c)
    return g


def layernorm(eps: float = 1e-5) -> Graph:
    """Inputs (x, w, b): x [b, s, h], w [h], b [h]."""
    g = Graph("layernorm")
    x, w, b = g.input(3), g.input(1), g.input(1)
    mu = g.mean(x, -1)
    xc = x - mu
    g.output(xc / g.sqrt(g.mean(xc * xc, -1) + eps) * w + b)
    return g
