"""TeMCO memory (§4, Fig. 10–11): internal-tensor peak, weights and time of the 10 evaluation models.

Per model of `vtmlir.models.TEMCO_ZOO` (AlexNet, VGG-11/16, ResNet-18/34/50, DenseNet-121-style and a
smaller DenseNet, UNet in two sizes; `models/temco_nets.py`) and batch size, four variants:

- `original`: the imported model, with ops on weights only evaluated into constants
  (`temco-fold-weight-ops`: BatchNorm's `1/sqrt(var+eps)`; bitwise the same, and so for every variant);
- `decomposed`: `temco-decompose` (Tucker-2, rank ratio 0.1), the paper's baseline;
- `skip_opt`: + `temco-remat-skip` (Algs. 1–2);
- `skip_opt_fusion`: + `temco-fuse-activation` (§3.2–3.3; for AlexNet/VGG Skip-Opt finds nothing,
  so this is the paper's "Fusion") + `temco-pad-in-place` (producers write into the interior of the
  padded buffers, so no source and padded copy are live together; bitwise the same).

Metrics per variant: `measured_internal_peak` (the CPU runtime's counting allocator: everything the
compiled function allocates, the caller's inputs/outputs and the weights apart; baseline = the
original's), `analysed_peak` (`temco-analyze-peak-memory`), `weights` (bytes of constant tensors),
`time` (median seconds per call of an untracked build; baseline = the decomposed model's, measured in
the same process) and `max_abs_diff` (vs the decomposed model's output). Per batch a summary:
`geomean_internal_peak_reduction` of skip_opt_fusion vs original (paper: 75.7 %) and
`geomean_time_ratio` vs decomposed (paper: 1.08× at batch 4, 1.70× at 32).

    python benchmarks/temco_memory.py [--batch 4] [--size S] [--models temco_vgg11,...] [--repeat 3] [--no-time]
                                      [--merge-lconvs] [--decompose-pointwise]

`--merge-lconvs` runs `temco-merge-lconvs` (Fig. 9a, concat and add forms; the add form is not
bitwise) before fusion; `--decompose-pointwise` decomposes 1×1 convs too (`skip-pointwise=false`:
ResNet downsample convs get an lconv, so the add form appears). Both mark the case names.

`--size` overrides every model's image side (to keep batch 32 affordable on a small CPU).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jsonl import Reporter, median_time  # noqa: E402

import vtmlir  # noqa: E402
from vtmlir.models import TEMCO_ZOO  # noqa: E402
from vtmlir.temco import analyze_peak_memory, decompose_convs  # noqa: E402
from vtmlir.temco.fold_weight_ops import fold_weight_ops  # noqa: E402
from vtmlir.temco.fuse_activation import fuse_activations  # noqa: E402
from vtmlir.backend.cpu.peak_memory import measure_peak_memory  # noqa: E402
from vtmlir.temco.pad_in_place import pad_in_place  # noqa: E402
from vtmlir.temco.remat_skip import remat_skip_connections  # noqa: E402

VARIANTS = ("original", "decomposed", "skip_opt", "skip_opt_fusion")


def variants(model, inputs, merge_lconvs: bool = False, skip_pointwise: bool = True):
    """The four variants of one model as graph-level modules (each a separate copy)."""
    original = vtmlir.import_torch(model, *inputs)
    fold_weight_ops(original)
    decomposed = vtmlir.as_module(str(original))
    decompose_convs(decomposed, 0.1, skip_pointwise)
    skip_opt = vtmlir.as_module(str(decomposed))
    remat_skip_connections(skip_opt)
    fused = vtmlir.as_module(str(skip_opt))
    fuse_activations(fused, merge_lconvs=merge_lconvs)
    pad_in_place(fused)
    return dict(zip(VARIANTS, (original, decomposed, skip_opt, fused)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--size", type=int, default=0, help="image side for every model (0: each model's own)")
    ap.add_argument("--models", default="", help="comma-separated names from TEMCO_ZOO (default: all)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-time", action="store_true", help="memory only (skip the untracked timing builds)")
    ap.add_argument("--merge-lconvs", action="store_true", help="temco-merge-lconvs before fusion (Fig. 9a)")
    ap.add_argument("--decompose-pointwise", action="store_true", help="decompose 1x1 convs too")
    args = ap.parse_args(argv)
    wanted = [m for m in args.models.split(",") if m] or list(TEMCO_ZOO)
    report = Reporter("temco_memory")
    reductions, time_ratios = [], []
    tag = ("/pointwise" if args.decompose_pointwise else "") + ("/merged" if args.merge_lconvs else "")
    for name in wanted:
        spec = TEMCO_ZOO[name]
        kwargs = {"batch": args.batch, "seed": 0}
        if args.size:
            kwargs["size"] = args.size
        model, inputs = spec.builder(**kwargs)
        case = f"{name}/b{args.batch}" + (f"/s{args.size}" if args.size else "") + tag
        modules = variants(model, inputs, args.merge_lconvs, not args.decompose_pointwise)
        rows, reference = {}, None
        for variant, module in modules.items():
            outputs, stats = measure_peak_memory(str(module), *inputs, opt_level=0)
            out = np.asarray(outputs[0] if isinstance(outputs, tuple) else outputs)
            if variant == "decomposed":
                reference = out
            row = {"measured_internal_peak": stats.peak_internal_bytes,
                   "analysed_peak": analyze_peak_memory(module).function("main").peak_bytes,
                   "weights": stats.weight_bytes}
            if reference is not None:
                row["max_abs_diff"] = float(np.max(np.abs(out - reference)))
            if not args.no_time:
                executable = vtmlir.compile(module, opt_level=0)
                row["time"] = median_time(lambda: executable(*inputs), args.repeat)
            rows[variant] = row
        for variant, row in rows.items():
            for metric, value in row.items():
                base_variant = "decomposed" if metric in ("time", "max_abs_diff") else "original"
                unit = {"time": "s", "max_abs_diff": "abs"}.get(metric, "bytes")
                report.emit(f"{case}/{variant}", metric, value, unit, rows[base_variant].get(metric))
        reduction = 1 - rows["skip_opt_fusion"]["measured_internal_peak"] / rows["original"]["measured_internal_peak"]
        reductions.append(reduction)
        report.emit(f"{case}/skip_opt_fusion", "internal_peak_reduction", round(100 * reduction, 2), "%", 75.7)
        if not args.no_time:
            ratio = rows["skip_opt_fusion"]["time"] / rows["decomposed"]["time"]
            time_ratios.append(ratio)
            report.emit(f"{case}/skip_opt_fusion", "time_ratio_vs_decomposed", round(ratio, 3), "x", 1.08)
    if len(wanted) > 1:
        # geomean of the remaining fractions (1 - reduction), as the paper averages memory ratios
        kept = math.exp(sum(math.log(1 - r) for r in reductions) / len(reductions))
        report.emit(f"all/b{args.batch}{tag}", "geomean_internal_peak_reduction", round(100 * (1 - kept), 2), "%", 75.7,
                    models=len(reductions))
        if time_ratios:
            report.emit(f"all/b{args.batch}{tag}", "geomean_time_ratio", round(math.exp(
                sum(math.log(r) for r in time_ratios) / len(time_ratios)), 3), "x", 1.08, models=len(time_ratios))


if __name__ == "__main__":
    main()
