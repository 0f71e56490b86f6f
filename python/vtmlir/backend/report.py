"""`compiled.report()` of every backend's executable: what the default pipeline did and how each
kernel was generated. The parts come from above (`vtmlir.optimize` sets `optimization`) and from
the backend itself (its kernel report); this module only puts them together."""

from __future__ import annotations


class CompileReport:
    """`compiled.report()`: what the default pipeline did per step (`optimization`, an
    `OptimizationReport`) and, on the CPU, each kernel's code generation schedule (`kernels`, a
    `codegen.KernelReport`, whose attributes — `kernels`, `vectorized`, `fallbacks`, `summary()` —
    are also read through this object)."""

    def __init__(self, optimization, kernels=None, extra: str = ""):
        self.optimization = optimization
        self.codegen = kernels
        self.extra = extra

    def __getattr__(self, name):
        codegen = self.__dict__.get("codegen")
        if codegen is None:
            raise AttributeError(name)
        return getattr(codegen, name)

    def to_text(self) -> str:
        parts = []
        if self.optimization is not None:
            parts.append(self.optimization.to_text())
        if self.extra:
            parts.append(self.extra)
        if self.codegen is not None:
            parts.append(f"codegen: {self.codegen}")
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.to_text()
