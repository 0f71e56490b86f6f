"""`layout-select-ilp` (VTensor §5.2, EWO): Fig. 8's resolution, then the layouts of element-wise ops
chosen by an ILP (HiGHS) minimising the bytes run-time conversions move -- or, with `cost=time`, the
layouts of the convolutions too, minimising the time model of `costs` (kernels + conversions).

It works per `func.func` on graph-level IR (linalg-on-tensors), first removing any conversion units
an earlier run left (`strip_conversions`), so it can be re-run and chained. See docs/layouts.md.
"""

from __future__ import annotations

from ..passes.registry import Option, Pass, register_pass
from . import costs
from .conventions import get_target
from .ewo import build_model, solve_ilp
from .report import JSON_OPTION, REPORT_OPTION, TARGET_OPTION
from .resolve import resolve_module


@register_pass
class LayoutSelectIlp(Pass):
    name = "layout-select-ilp"
    summary = "Choose element-wise ops' layouts by an ILP minimising conversion bytes (VTensor §5.2 EWO, HiGHS)"
    description = (
        "Resolves layouts like layout-resolve, then gives every flexible op (element-wise, pad, "
        "concat) a candidate set and solves an ILP (highspy) minimising the bytes run-time "
        "conversions move; constants are converted at compile time (free); a value converted to a "
        "layout once serves all its users. Rewrites the function with the chosen layouts. cost=time: "
        "every applicable variant of a convolution, depthwise convolution or pooling is a choice too, "
        "and the ILP minimises the CPU time model (kernels + transposing copies, docs/layouts.md); a "
        "function it leaves all row-major is not changed."
    )
    options = (TARGET_OPTION, REPORT_OPTION, JSON_OPTION,
               Option("cost", str, "bytes", "objective: 'bytes' (conversion bytes), 'count' (the paper's 1 "
                                            "per conversion) or 'time' (the CPU time model of kernels and "
                                            "conversions; convolutions' layouts chosen too)"),
               Option("share", bool, True, "model one conversion per (value, layout); false: one per use (the paper)"),
               Option("time-limit", float, 60.0, "HiGHS time limit in seconds"))

    def run(self, module):
        with module.context:
            return self._run(module)

    def _run(self, module):
        if self.cost not in ("bytes", "count", "time"):
            self.emit_error(module, f"layout-select-ilp: cost must be 'bytes', 'count' or 'time', got '{self.cost}'")
            return
        target = get_target(self.target)
        timed = self.cost == "time"

        def choose(res) -> tuple:
            if timed:
                model = build_model(res, target, share=self.share, kernel_cost=costs.kernel_ns,
                                    conversion_cost=costs.conversion_ns)
            else:
                model = build_model(res, target, share=self.share)
            if self.cost == "count":
                for v in model.problem.values:
                    v.cost = 1.0 if v.cost > 0 else 0.0
            solution = solve_ilp(model.problem, time_limit=self.time_limit)
            # Keep the resolved choice when the ILP finds nothing better (ties keep Fig. 8's); in
            # time the all-row-major one (ties change nothing).
            keep = model.row_major_choice() if timed else model.initial_choice()
            kept = keep is not None and model.problem.cost(keep) <= solution.objective
            model.apply(keep if kept else solution.choice)
            figures = (solution.variables, solution.integer_variables, solution.constraints, solution.solve_seconds,
                       solution.status)
            if timed:
                figures += (model.problem.cost(keep if kept else solution.choice),
                            model.problem.cost(keep) if keep is not None else 0.0)
            return figures

        report = resolve_module(module, target, self.name, share=self.share, choose=choose, keep_row_major=timed)
        self.write_report(module, report.to_json() + "\n" if self.json else report.to_text())
        return report
