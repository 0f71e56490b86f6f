"""Calibration of the layout ILP's time model (`vtmlir.layouts.costs`, docs/layouts.md "Cost model").

Prints JSON lines (benchmarks/README.md), thread CPU time of the profiled kernels
(`vtmlir.compile(..., threads=1, profile=True)`, `profile(clock="cpu")`, median of `--repeat` calls):

- `conv_ns` per convolution shape and layout (`nchw` = opt level 0; `nChw16c`, `nChw8c`, `nhwc` =
  that variant forced by a one-variant kernel table, `layout-select-ilp, layout-materialize`): the
  kernels' time (`CpuProfile.kernel_ns`: the marks' own cost subtracted per kernel call; outside the
  kernels, allocations, is not counted) less its input's and output's conversions (the
  data-movement kernels writing the input's physical shape in the layout and the output's NCHW one,
  each also printed as `convert_in_situ_ns`), i.e. the convolution with its padding and fill, as
  the ILP charges a convolution node; with `model_ns`, what `vtmlir.layouts.costs` predicts for it;
- `convert_ns` per tensor shape and conversion (NCHW -> nChw16c / nChw8c / NHWC and back) as the
  codegen runs it (the transposing copy `layout-materialize` emits), and `copy_ns` a plain copy
  (an element-wise kernel of the same bytes), with `model_ns`.

`--fit` then fits the kernel coefficients (`costs.CONV`, `costs.DEPTHWISE`) to the `conv_ns`
records: per layout, non-negative least squares on relative error (each kernel's equation divided by
its measured time) over that layout's terms (`FIT_TERMS`); with several runs (`--from` files of
earlier runs' JSON lines) the median of each kernel's times. It prints one `fit` record per layout
(the coefficients, ready to paste, and predicted / measured: median, min, max, 5th-95th
percentiles) and one `fit_error` record: the 5th-95th percentiles of predicted / measured over all
the kernels ("90 % of the kernels within x-y of their prediction", what `costs.UNCERTAINTY` is set
from), with the layouts not named in `--fit` at their current coefficients. `--anchor` fits each
kernel's time relative to its NCHW kernel's (same convolution, same runs) times NCHW's prediction:
re-fitting some layouts on a day the machine runs the unchanged NCHW kernels slower or faster than
at their calibration. A recalibration after a schedule change of the blocked layouts:

    for i in 1 2 3; do python benchmarks/layout_costs.py --only conv --repeat 15 > run$i.jsonl; done
    python benchmarks/layout_costs.py --fit nChw16c,nChw8c --anchor --from run*.jsonl

    python benchmarks/layout_costs.py [--repeat 20] [--only conv|convert] [--fit [LAYOUTS] [--anchor] [--from FILE...]]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import numpy as np
import torch

import vtmlir
from vtmlir.layouts import conventions as cv
from vtmlir.layouts import costs

sys.path.insert(0, os.path.dirname(__file__))
from jsonl import Reporter  # noqa: E402

# (C, F, H, k, stride, groups): the convolutions of the layout zoo's networks at 32x32 and of the
# VTC blocks (8-48 channels), 1x1 to 64x64 images; then depthwise ones.
CONVS = [
    (16, 16, 32, 3, 1, 1), (16, 64, 8, 1, 1, 1), (64, 16, 8, 1, 1, 1), (64, 64, 8, 3, 1, 1),
    (128, 128, 4, 3, 1, 1), (256, 256, 2, 3, 1, 1), (512, 512, 1, 3, 1, 1), (256, 1024, 2, 1, 1, 1),
    (1024, 256, 2, 1, 1, 1), (512, 2048, 1, 1, 1, 1), (2048, 512, 1, 1, 1, 1), (64, 128, 8, 3, 2, 1),
    (32, 32, 16, 3, 1, 1), (32, 64, 16, 1, 1, 1), (96, 24, 8, 1, 1, 1), (24, 144, 8, 1, 1, 1),
    (160, 960, 1, 1, 1, 1), (960, 160, 1, 1, 1, 1), (320, 1280, 1, 1, 1, 1), (64, 384, 2, 1, 1, 1),
    (8, 16, 32, 3, 1, 1), (16, 8, 32, 1, 1, 1), (48, 48, 20, 1, 1, 1), (32, 32, 20, 3, 1, 1),
    (24, 24, 28, 1, 1, 1), (48, 48, 28, 3, 1, 1),
    (32, 32, 16, 3, 1, 32), (144, 144, 8, 3, 2, 144), (384, 384, 2, 3, 1, 384), (960, 960, 1, 3, 1, 960),
    (48, 48, 20, 3, 1, 48), (96, 96, 16, 3, 1, 96),
    (8, 16, 64, 3, 1, 1), (16, 8, 64, 3, 1, 1), (32, 32, 64, 1, 1, 1), (64, 64, 56, 3, 1, 1),
    (16, 16, 16, 3, 2, 1), (32, 32, 8, 3, 1, 1), (16, 32, 16, 3, 2, 1), (32, 64, 4, 3, 1, 1),
    (16, 16, 8, 3, 1, 1), (64, 64, 4, 3, 2, 1),
]
SHAPES = [(16, 32), (32, 16), (64, 8), (256, 2), (2048, 1), (24, 28), (48, 20), (96, 14), (32, 56), (512, 4)]


def _target(variant: str) -> str:
    """A one-variant kernel table (convolutions in `variant`, all else as `cpu`)."""
    name = f"calibrate-{variant}"
    if name in cv.TARGETS:
        return name
    kernels = tuple(cv.KernelConvention(k.name, k.ops, operand_dims=k.operand_dims,
                                        variants=tuple(v for v in k.variants if v.name == variant))
                    for k in cv.BLOCKED_CONV_KERNELS)
    base = cv.get_target("cpu")
    cv.register_target(cv.Target(name, f"calibration: convolutions in {variant}",
                                 kernels + base.conventions[len(cv.BLOCKED_CONV_KERNELS):], base.candidates))
    return name


def _profile(model, x, repeat, **kw):
    compiled = vtmlir.compile(model, x, threads=1, profile=True, **kw)
    return compiled.profile(x, repeat=repeat, clock="cpu")


_CONVERTED: dict = {}


def _convert_ns(kind: str, c: int, h: int, repeat: int) -> int:
    """Thread CPU time of one conversion (or plain copy) of a 1 x c x h x h tensor, as compiled."""
    key = (kind, c, h)
    if key not in _CONVERTED:
        x = torch.randn(1, c, h, h)
        p = _profile(_Convert(kind), x, repeat, opt_level=0)
        _CONVERTED[key] = p.kernel_ns
    return _CONVERTED[key]


def conv_cases(rep: Reporter, repeat: int) -> None:
    for c, f, h, k, s, g in CONVS:
        torch.manual_seed(0)
        model = torch.nn.Conv2d(c, f, k, stride=s, padding=k // 2, groups=g, bias=False).eval()
        x = torch.randn(1, c, h, h)
        base = _profile(model, x, repeat, opt_level=0)
        case = f"{c}x{f}x{h}k{k}s{s}g{g}"
        site = dict(channels=c, filters=f, image=h, kernel=k, stride=s, groups=g)
        variants = ["nchw", "nhwc"] + [b for b, by in (("nChw16c", 16), ("nChw8c", 8)) if c % by == 0 and f % by == 0]
        for variant in variants:
            if variant == "nchw":
                ns = base.kernel_ns
            else:
                p = _profile(model, x, repeat, pipeline=f"layout-select-ilp{{target={_target(variant)}}}, layout-materialize")
                # Less the input's and the output's conversion: the data-movement kernels writing
                # the input's physical shape in the layout and the output's (NCHW, blocked: split).
                o = model(x).shape[2]
                if variant == "nhwc":
                    into, back = (1, h, h, c), (1, f, o, o)
                else:
                    b = int(variant[4:-1])
                    into, back = (1, c // b, h, h, b), (1, f // b, b, o, o)
                ns = p.kernel_ns
                for kind, shape in (("into", into), ("from", back)):
                    desc = "data-movement " + "x".join(map(str, shape))
                    hits = [k.time_ns for k in p.kernels if k.description == desc and k.calls == 1]
                    moved = max(hits, default=0)  # a fill of the same shape is the cheaper one
                    ns -= moved
                    rep.emit(case, "convert_in_situ_ns", moved, "ns", None, layout=variant, direction=kind,
                             bytes=4 * (c * h * h if kind == "into" else f * o * o))
            o = (h + 2 * (k // 2) - k) // s + 1
            model_ns = costs.conv_ns(costs.ConvShape(c, f, o, o, k * k, s, g), variant)
            rep.emit(case, "conv_ns", ns, "ns", None, layout=variant, model_ns=round(model_ns), **site)


class _Convert(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        n, c, h, w = x.shape
        if self.kind == "copy":
            return x * 2.0
        if self.kind == "NHWC":
            return x.permute(0, 2, 3, 1).contiguous()
        if self.kind == "from-NHWC":
            return x.permute(0, 3, 1, 2).contiguous()
        b = int(self.kind.removeprefix("from-").removeprefix("nChw").removesuffix("c"))
        if self.kind.startswith("from-"):
            return x.reshape(n, c // b, h, w, b).permute(0, 1, 4, 2, 3).reshape(n, c, h, w).contiguous()
        return x.reshape(n, c // b, b, h, w).permute(0, 1, 3, 4, 2).contiguous()


def convert_cases(rep: Reporter, repeat: int) -> None:
    for c, h in SHAPES:
        x = torch.randn(1, c, h, h)
        for kind in ("copy", "NHWC", "from-NHWC", "nChw16c", "from-nChw16c", "nChw8c", "from-nChw8c"):
            if kind.endswith("16c") and c % 16 or kind.endswith("8c") and c % 8:
                continue
            ns = _convert_ns(kind, c, h, repeat)
            nbytes = 4 * c * h * h
            layout = kind.removeprefix("from-").replace("NHWC", "nhwc")
            model = costs.copy_ns(nbytes) if kind == "copy" else \
                costs.convert_ns(nbytes, layout, into=not kind.startswith("from-"))
            rep.emit(f"{c}x{h}x{h}", "copy_ns" if kind == "copy" else "convert_ns", ns, "ns", None,
                     conversion=kind, bytes=nbytes, model_ns=round(model))


# The terms each layout's model has (`costs.conv_terms`: fixed, per_tap, per_mac, per_gather,
# per_weight); the others are held at 0. Depthwise convolutions: fixed + per_mac.
FIELDS = ("fixed", "per_tap", "per_mac", "per_gather", "per_weight")
FIT_TERMS = {
    ("conv", "nchw"): ("fixed", "per_mac", "per_gather"),
    ("conv", "nChw16c"): ("fixed", "per_tap", "per_mac", "per_weight"),
    ("conv", "nChw8c"): ("fixed", "per_tap", "per_mac", "per_weight"),
    ("conv", "nhwc"): ("fixed", "per_tap", "per_mac", "per_gather", "per_weight"),
}
FIT_TERMS.update({("depthwise", layout): ("fixed", "per_mac") for _, layout in list(FIT_TERMS)})


def nnls(a: np.ndarray, b: np.ndarray, iterations: int = 500) -> np.ndarray:
    """min |a x - b| subject to x >= 0 (Lawson-Hanson active set; scipy.optimize.nnls's algorithm)."""
    n = a.shape[1]
    x, passive = np.zeros(n), np.zeros(n, dtype=bool)
    for _ in range(iterations):
        w = a.T @ (b - a @ x)
        if passive.all() or w[~passive].max(initial=0.0) <= 1e-12 * max(1.0, np.abs(w).max()):
            break
        passive[np.argmax(np.where(passive, -np.inf, w))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            shrink = passive & (z <= 0)
            alpha = np.min(x[shrink] / (x[shrink] - z[shrink]))
            x = x + alpha * (z - x)
            passive &= x > 1e-15
            x[~passive] = 0.0
    return x


def _records(paths) -> list[dict]:
    rows = []
    for path in paths:
        with open(path) as f:
            rows += [r for r in map(json.loads, filter(str.strip, f)) if r.get("metric") == "conv_ns"]
    return rows


def _shape(r) -> costs.ConvShape:
    k, s, h = r["kernel"], r["stride"], r["image"]
    o = (h + 2 * (k // 2) - k) // s + 1
    return costs.ConvShape(r["channels"], r["filters"], o, o, k * k, s, r["groups"])


def fit(rep: Reporter, rows: list[dict], layouts, anchor: bool = False) -> None:
    """Fit the coefficients of `layouts` (None: all) to the `conv_ns` records `rows` and report.

    `anchor`: each kernel's time scaled by its NCHW kernel's predicted / measured time (same
    convolution, same runs), i.e. fitted to its measured ratio to NCHW times NCHW's prediction: the
    unchanged NCHW kernels measure the machine's state against the calibration's (refit a layout
    on a machine slower or faster than the one the other layouts were fitted on, and the ILP
    compares times from two machines)."""
    times: dict = {}
    for r in rows:
        times.setdefault((r["case"], r["layout"]), (r, []))[1].append(r["value"])
    groups: dict = {}
    for (case, layout), (r, values) in times.items():
        kind = "depthwise" if r["groups"] != 1 else "conv"
        ns = statistics.median(values)
        if anchor and layout != "nchw":
            base = statistics.median(times[(case, "nchw")][1])
            ns *= costs.conv_ns(_shape(r), "nchw") / base
        groups.setdefault((kind, layout), []).append((_shape(r), ns))
    ratios = []
    for (kind, layout), kernels in sorted(groups.items()):
        table = costs.DEPTHWISE if kind == "depthwise" else costs.CONV
        kernels = [(shape, ns) for shape, ns in kernels if ns > 0]
        if layouts is None or (layout if kind == "conv" else f"depthwise:{layout}") in layouts:
            terms = FIT_TERMS[(kind, layout)]
            cols = [FIELDS.index(t) for t in terms]
            a = np.array([[costs.conv_terms(shape, layout)[i] / ns for i in cols] for shape, ns in kernels])
            scale = np.abs(a).max(axis=0)
            scale[scale == 0] = 1.0
            x = nnls(a / scale, np.ones(len(kernels))) / scale
            values = dict.fromkeys(FIELDS, 0.0) | {t: float(v) for t, v in zip(terms, x)}
            coefficients = costs.KernelCoefficients(**values)
            fitted = True
        else:
            coefficients, fitted = table[layout], False
        pred = [float(np.dot(costs.conv_terms(shape, layout), [getattr(coefficients, f) for f in FIELDS]))
                / ns for shape, ns in kernels]
        ratios += pred
        rep.emit(f"{kind} {layout}", "fit", round(statistics.median(pred), 3), "predicted/measured", None,
                 fitted=fitted, n=len(kernels), min=round(min(pred), 3), max=round(max(pred), 3),
                 p5_p95=[round(float(p), 3) for p in np.percentile(pred, [5, 95])],
                 coefficients={f: float(f"{getattr(coefficients, f):.4g}") for f in FIELDS})
    lo, hi = np.percentile(ratios, [5, 95])
    rep.emit("all", "fit_error", [round(float(lo), 3), round(float(hi), 3)], "predicted/measured", None,
             n=len(ratios), percentiles=[5, 95], median=round(statistics.median(ratios), 3))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", choices=("conv", "convert"))
    ap.add_argument("--fit", nargs="?", const="all", metavar="LAYOUTS",
                    help="fit the coefficients of these layouts' convolutions (comma-separated, e.g. nChw16c,nChw8c; "
                         "depthwise:nChw16c for a depthwise one's; default all)")
    ap.add_argument("--from", dest="inputs", nargs="+", metavar="FILE",
                    help="with --fit: fit these runs' JSON lines (medians over them) instead of measuring")
    ap.add_argument("--anchor", action="store_true",
                    help="with --fit: fit each kernel's time relative to its NCHW kernel's, times NCHW's prediction")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rep = Reporter("layout_costs")
    layouts = None if args.fit in (None, "all") else set(args.fit.split(","))
    if args.inputs:
        if not args.fit:
            ap.error("--from needs --fit")
        fit(rep, _records(args.inputs), layouts, args.anchor)
        return
    if args.fit:
        import contextlib
        import io
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):  # the run's own records, then the fit's
            conv_cases(rep, args.repeat)
        print(buffer.getvalue(), end="", flush=True)
        rows = [r for r in map(json.loads, buffer.getvalue().splitlines()) if r["metric"] == "conv_ns"]
        fit(rep, rows, layouts, args.anchor)
        return
    if args.only != "convert":
        conv_cases(rep, args.repeat)
    if args.only != "conv":
        convert_cases(rep, args.repeat)


if __name__ == "__main__":
    main()
