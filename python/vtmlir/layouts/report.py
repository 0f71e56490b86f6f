"""The report of `layout-resolve` and `layout-select-ilp` (conversions and bytes per function, the
ILP's size and status), and the options the two passes share.
"""

from __future__ import annotations

import json as _json
from dataclasses import asdict, dataclass, field

from ..passes.registry import Option, report_option


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
    model_ns: float = 0.0           # cost=time: the time model's figure for the chosen layouts
    row_major_ns: float = 0.0       # ... and for every kernel row-major (no conversion)
    laid_out: int = 0               # kernels run in a non-row-major layout


@dataclass
class LayoutReport:
    pass_name: str
    target: str
    functions: list[FunctionLayoutReport] = field(default_factory=list)

    def totals(self) -> dict:
        keys = ("naive_conversions", "naive_bytes", "conversions", "bytes", "constant_relayouts",
                "ilp_variables", "ilp_integer_variables", "ilp_constraints", "ilp_solve_seconds",
                "model_ns", "row_major_ns", "laid_out")
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
            line += f"; {f.laid_out} kernel(s) in a non-row-major layout"
            if f.row_major_ns:
                line += (f"; time model {f.model_ns / 1e3:.1f} us chosen vs {f.row_major_ns / 1e3:.1f} us "
                         f"all row-major")
            lines.append(line)
        return "\n".join(lines) + "\n"


TARGET_OPTION = Option("target", str, "cpu", "kernel convention table (vtmlir.layouts.TARGETS): cpu, paper-mkl, cpu-nhwc, cuda")
REPORT_OPTION = report_option("the per-function conversion report")
JSON_OPTION = Option("json", bool, False, "report as JSON")
