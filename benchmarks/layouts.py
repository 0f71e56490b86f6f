"""Layout conversions per network (VTensor §6.5, Fig. 13): naive resolution vs EWO.

For each whole network of the layout zoo (`vtmlir.models.LAYOUT_ZOO`) and each kernel-convention
target, imports the model once and prints JSON lines (benchmarks/README.md) with:

- `conversions_naive`: run-time `layout.convert`s after `layout-resolve` (Fig. 8, one per use —
  the paper's "before LOO" count), and `bytes_naive`;
- `conversions_shared`: `layout-resolve{share=true}`, one conversion per (value, layout) — what
  hoisting a value's identical conversions above its branch point gives (LHO's effect, §5.2);
- `conversions_ewo`, `bytes_ewo`: after `layout-select-ilp` (EWO as an ILP with shared conversions,
  bytes as cost — vtmlir's default);
- `conversions_ewo_count`: `layout-select-ilp{cost=count share=false}`, the paper's own objective;
- `ilp_variables`, `ilp_integer_variables`, `ilp_constraints`, `ilp_solve_seconds` (of the default
  `layout-select-ilp`), `constant_relayouts` (operands laid out at compile time, free);
- `import_seconds` (torch → linalg) for context.

    python benchmarks/layouts.py [--models resnet152,vgg19] [--targets paper-mkl,cpu,cpu-nhwc]
"""

from __future__ import annotations

import argparse
import json
import time

import vtmlir
from vtmlir.models import LAYOUT_ZOO, get
from vtmlir.passes import get_pass


def _emit(case: str, metric: str, value, unit: str, baseline=None, **extra) -> None:
    line = {"suite": "layouts", "case": case, "metric": metric, "value": value, "unit": unit,
            "baseline": baseline}
    line.update(extra)
    print(json.dumps(line), flush=True)


def _run(module, name: str, **options):
    p = get_pass(name)(**options)
    p.run(module.operation)
    return p.last_report.totals()


def measure(model_name: str, targets: list[str]) -> None:
    model, inputs = get(model_name).build(batch=1, seed=0)
    t0 = time.perf_counter()
    module = vtmlir.import_torch(model, *inputs)
    _emit(model_name, "import_seconds", round(time.perf_counter() - t0, 3), "s")
    for target in targets:
        case = f"{model_name}/{target}"
        naive = _run(module, "layout-resolve", target=target)
        shared = _run(module, "layout-resolve", target=target, share=True)
        count = _run(module, "layout-select-ilp", target=target, cost="count", share=False)
        ewo = _run(module, "layout-select-ilp", target=target)
        assert module.operation.verify()
        _emit(case, "conversions_naive", naive["conversions"], "count")
        _emit(case, "bytes_naive", naive["bytes"], "bytes")
        _emit(case, "conversions_shared", shared["conversions"], "count", naive["conversions"])
        _emit(case, "conversions_ewo_count", count["conversions"], "count", naive["conversions"])
        _emit(case, "conversions_ewo", ewo["conversions"], "count", naive["conversions"])
        _emit(case, "bytes_ewo", ewo["bytes"], "bytes", naive["bytes"])
        _emit(case, "constant_relayouts", ewo["constant_relayouts"], "count")
        _emit(case, "ilp_variables", ewo["ilp_variables"], "count",
              integer=ewo["ilp_integer_variables"])
        _emit(case, "ilp_constraints", ewo["ilp_constraints"], "count")
        _emit(case, "ilp_solve_seconds", round(ewo["ilp_solve_seconds"], 4), "s")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(LAYOUT_ZOO))
    ap.add_argument("--targets", default="paper-mkl,cpu,cpu-nhwc")
    args = ap.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    for name in (m for m in args.models.split(",") if m):
        measure(name, targets)


if __name__ == "__main__":
    main()
