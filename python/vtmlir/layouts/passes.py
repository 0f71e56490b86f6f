"""The layout passes: `layout-resolve` (VTensor §5.1, Fig. 8) and `layout-select-ilp` (§5.2, EWO).

Both work per `func.func` on graph-level IR (linalg-on-tensors), first removing any conversion units
an earlier run left (`strip_conversions`), so they can be re-run and chained. See docs/layouts.md.
"""

from __future__ import annotations

import json as _json
from dataclasses import asdict, dataclass, field

from ..ir_utils import symbol_name
from ..passes.registry import Option, Pass, register_pass, report_option
from .conventions import get_target
from .ewo import build_model, solve_ilp
from .resolve import apply_resolution, functions, resolve_function, strip_conversions


@dataclass
class FunctionLayoutReport:
    function: str
    naive_conversions: int          # Fig. 8, one per use
    naive_bytes: int
    conversions: int                # run-time layout.convert units in the output
    bytes: int
    constant_relayouts: int         # constant operands laid out at compile time (free)
    ilp_variables: int = 0
    ilp_integer_variables: int = 0
    ilp_constraints: int = 0
    ilp_solve_seconds: float = 0.0
    ilp_status: str = ""


@dataclass
class LayoutReport:
    pass_name: str
    target: str
    functions: list[FunctionLayoutReport] = field(default_factory=list)

    def totals(self) -> dict:
        keys = ("naive_conversions", "naive_bytes", "conversions", "bytes", "constant_relayouts",
                "ilp_variables", "ilp_integer_variables", "ilp_constraints", "ilp_solve_seconds")
        return {k: sum(getattr(f, k) for f in self.functions) for k in keys}

    def to_json(self) -> str:
        return _json.dumps({"pass": self.pass_name, "target": self.target,
                            "functions": [asdict(f) for f in self.functions],
                            "totals": self.totals()}, indent=2)

    def to_text(self) -> str:
        lines = [f"{self.pass_name} report (target {self.target})"]
        for f in self.functions:
            line = (f"func @{f.function}: conversions {f.naive_conversions} -> {f.conversions}, "
                    f"bytes {f.naive_bytes} -> {f.bytes}; {f.constant_relayouts} constant operand(s) "
                    f"re-laid at compile time")
            if f.ilp_status:
                line += (f"; ILP {f.ilp_variables} variables ({f.ilp_integer_variables} integer), "
                         f"{f.ilp_constraints} constraints, {f.ilp_status}, "
                         f"{f.ilp_solve_seconds * 1000:.1f} ms")
            lines.append(line)
        return "\n".join(lines) + "\n"


_TARGET = Option("target", str, "cpu", "kernel convention table (vtmlir.layouts.TARGETS): cpu, paper-mkl, cpu-nhwc, cuda")
_REPORT = report_option("the per-function conversion report")
_JSON = Option("json", bool, False, "report as JSON")


@register_pass
class LayoutResolve(Pass):
    name = "layout-resolve"
    summary = "Resolve produced/required layouts (VTensor Fig. 8) and insert layout.convert where they differ"
    description = (
        "Walks each function in topological order; every op gets the layouts of the kernel the "
        "target's convention table picks (priority, guideline; ANY inherits the first input's), as "
        "layout.required / layout.produced attributes. Where a value is produced in another layout "
        "than a use requires, a conversion (vt.view? -> layout.convert -> vt.view?) is inserted "
        "before that use; constant operands are laid out at compile time instead."
    )
    options = (_TARGET, _REPORT, _JSON,
               Option("share", bool, False, "one conversion per (value, layout) instead of one per use"))

    def run(self, module):
        with module.context:
            return self._run(module)

    def _run(self, module):
        target = get_target(self.target)
        report = LayoutReport(self.name, target.name)
        for func in functions(module):
            strip_conversions(func)
            res = resolve_function(func, target)
            naive, naive_bytes = len(res.conversions()), res.conversion_bytes(share=False)
            after_bytes, relaid = res.conversion_bytes(share=self.share), res.constant_conversions()
            n = apply_resolution(res, share=self.share)
            report.functions.append(FunctionLayoutReport(
                symbol_name(func), naive, naive_bytes, n, after_bytes, relaid))
        self.write_report(module, report.to_json() + "\n" if self.json else report.to_text())
        return report


@register_pass
class LayoutSelectIlp(Pass):
    name = "layout-select-ilp"
    summary = "Choose element-wise ops' layouts by an ILP minimising conversion bytes (VTensor §5.2 EWO, HiGHS)"
    description = (
        "Resolves layouts like layout-resolve, then gives every flexible op (element-wise, pad, "
        "concat) a candidate set and solves an ILP (highspy) minimising the bytes run-time "
        "conversions move; constants are converted at compile time (free); a value converted to a "
        "layout once serves all its users. Rewrites the function with the chosen layouts."
    )
    options = (_TARGET, _REPORT, _JSON,
               Option("cost", str, "bytes", "conversion cost: 'bytes' (tensor size) or 'count' (the paper's 1)"),
               Option("share", bool, True, "model one conversion per (value, layout); false: one per use (the paper)"),
               Option("time-limit", float, 60.0, "HiGHS time limit in seconds"))

    def run(self, module):
        with module.context:
            return self._run(module)

    def _run(self, module):
        if self.cost not in ("bytes", "count"):
            self.emit_error(module, f"layout-select-ilp: cost must be 'bytes' or 'count', got '{self.cost}'")
            return
        target = get_target(self.target)
        report = LayoutReport(self.name, target.name)
        for func in functions(module):
            strip_conversions(func)
            res = resolve_function(func, target)
            naive, naive_bytes = len(res.conversions()), res.conversion_bytes(share=False)
            model = build_model(res, target, share=self.share)
            if self.cost == "count":
                for v in model.problem.values:
                    v.cost = 1.0 if v.cost > 0 else 0.0
            solution = solve_ilp(model.problem, time_limit=self.time_limit)
            # Keep the resolved choice when the ILP finds nothing better (ties keep Fig. 8's).
            initial = model.initial_choice()
            if model.problem.cost(initial) <= solution.objective:
                choice = initial
            else:
                choice = solution.choice
            model.apply(choice)
            after_bytes, relaid = res.conversion_bytes(share=self.share), res.constant_conversions()
            n = apply_resolution(res, share=self.share)
            report.functions.append(FunctionLayoutReport(
                symbol_name(func), naive, naive_bytes, n, after_bytes, relaid, solution.variables, solution.integer_variables,
                solution.constraints, solution.solve_seconds, solution.status))
        self.write_report(module, report.to_json() + "\n" if self.json else report.to_text())
        return report
