"""`vtmlir-default`: the default optimisation pipeline of `vtmlir.compile` as one pass for `vt-opt`.

    vt-opt model.mlir --pass-pipeline='builtin.module(vtmlir-default{target=cpu opt-level=2})'

It runs what `vtmlir.optimize.plan` chooses for the graph (VTC, VTensor layouts, TeMCO, Tilus, in
that order; docs/pipeline.md), each step as its own pipeline, and leaves the IR where `vtmlir.compile`
hands it to the backend.
"""

from __future__ import annotations

from .optimize import LOWBIT_PIPELINES, OPT_LEVELS, TARGETS, optimize
from .passes.registry import Option, Pass, register_pass, report_option


@register_pass
class VtmlirDefault(Pass):
    name = "vtmlir-default"
    summary = "The default optimisation pipeline of vtmlir.compile: VTC, layouts, TeMCO, Tilus where they win"
    description = (
        "Plans and runs vtmlir's graph-level systems for the target and opt level (vtmlir.optimize): "
        "data-movement elimination, layout selection, TeMCO rematerialisation and fusion, low-bit "
        "lowering. The report lists per step what changed and its time."
    )
    options = (
        Option("target", str, "cpu", "the target whose measured choices apply: cpu or cuda"),
        Option("opt-level", int, 2, "0: nothing; 1: bitwise-identical steps never slower; 2: all that win"),
        Option("memory-budget", int, 0, "bytes; > 0 runs TeMCO's rematerialisation and fusion whatever the graph"),
        Option("lowbit", str, "vector", "Tilus lowering of quantised weights: vector, portable or none"),
        report_option("the step-by-step report"),
    )

    def run(self, module):
        if self.opt_level not in OPT_LEVELS:
            self.emit_error(module, f"{self.name}: opt-level must be one of {OPT_LEVELS}, got {self.opt_level}")
            return
        if self.lowbit != "none" and self.lowbit not in LOWBIT_PIPELINES:
            self.emit_error(module, f"{self.name}: lowbit must be vector, portable or none, got '{self.lowbit}'")
            return
        if self.target not in TARGETS:
            self.emit_error(module, f"{self.name}: unknown target '{self.target}' (expected {' or '.join(TARGETS)})")
            return
        report = optimize(module, target=self.target, opt_level=self.opt_level,
                          memory_budget=self.memory_budget or None,
                          lowbit=None if self.lowbit == "none" else self.lowbit)
        self.write_report(module, report.to_text() + "\n")
        return report
