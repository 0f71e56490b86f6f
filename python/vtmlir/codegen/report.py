"""The kernel report: which schedule each kernel got, and which kept scalar loops and why.

Read from the IR after `transform-interpreter`: a kernel whose tagged linalg op is still there was
not (fully) vectorised -- its schedule did not apply, or it has none -- and runs as loops.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch_mlir import ir

from .attach_schedule import KernelPlan
from .kernels import KERNEL_ATTR, UNFUSED_PREFIX, KernelKind, tagged_ops


def remaining_kernel_ids(module_op) -> set[int]:
    """Ids of the kernels that still have a linalg op (they become loops)."""
    return {ir.IntegerAttr(op.attributes[KERNEL_ATTR]).value for op in tagged_ops(module_op)}


@dataclass(frozen=True)
class KernelReport:
    """Per kernel: the plan, and whether it ended up vectorised (`vectorized`); and the entry
    function's workspace (`codegen-plan-workspace`'s `WorkspacePlan`, None where none was planned)."""

    kernels: tuple[KernelPlan, ...]
    vectorized: frozenset[int]
    workspace: object = None

    @property
    def fallbacks(self) -> list[KernelPlan]:
        """Kernels that run as scalar loops, except the trivially small ones (`scalar`) and the
        importer's run-time checks (`check`: kernels without outputs whose body is a `cf.assert`)."""
        quiet = (KernelKind.SCALAR.value, KernelKind.CHECK.value)
        return [k for k in self.kernels if k.id not in self.vectorized and k.kind not in quiet]

    @property
    def fused(self) -> dict[int, tuple[int, str]]:
        """{kernel id: (contraction id, role)} for the kernels run in a contraction's outer tiles
        (its fill: "prologue"; its bias, activation, BatchNorm, residual add: "epilogue")."""
        return {k.id: (k.fused_into, k.fused_role) for k in self.kernels if k.fused_into is not None}

    def summary(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for k in self.kernels:
            state = "vectorized" if k.id in self.vectorized else "loops"
            key = f"{k.kind}:{state}"
            counts[key] = counts.get(key, 0) + 1
        return counts

    def __str__(self) -> str:
        lines = [f"{len(self.kernels)} kernels, {len(self.vectorized)} vectorised, "
                 f"{len(self.fallbacks)} kept as loops"]
        if self.fused:
            lines[0] += f", {len(self.fused)} fused into {len({c for c, _ in self.fused.values()})} contractions"
        roles = {k.id: k.fused_role for k in self.kernels}
        for k in self.kernels:
            if k.id in self.vectorized:
                fused = f", fused into kernel {k.fused_into} ({k.fused_role})" if k.fused_into is not None else ""
                with_ = (" + " + ", ".join(f"{roles.get(n, 'neighbour')} {n}" for n in k.neighbours)
                         if k.neighbours else "")
                lines.append(f"  kernel {k.id}: {k.description} -> {k.schedule}{with_}{fused}")
            else:
                why = k.reason or "its schedule did not apply"
                lines.append(f"  kernel {k.id}: {k.description} -> loops ({why}) at {k.location}")
        if self.workspace is not None:
            lines.append(str(self.workspace))
        return "\n".join(lines)


def kernel_report(plans: list[KernelPlan], module_op) -> KernelReport:
    """The report after the interpreter ran on `module_op`. A kernel planned into a contraction's
    tiles whose own schedule ran after all (`UNFUSED_PREFIX`: the contraction's failed before
    fusing it) is reported as scheduled alone."""
    unfused = {int(name[len(UNFUSED_PREFIX):]) for name in module_op.attributes if name.startswith(UNFUSED_PREFIX)}
    if unfused:
        plans = [replace(p, fused_into=None, fused_role="") if p.id in unfused else
                 replace(p, neighbours=tuple(n for n in p.neighbours if n not in unfused)) for p in plans]
    left = remaining_kernel_ids(module_op)
    done = frozenset(p.id for p in plans if p.schedule is not None and p.id not in left)
    fixed = tuple(p if p.id in done or p.schedule is None or p.reason
                  else replace(p, reason=f"the {p.schedule} schedule did not apply") for p in plans)
    return KernelReport(fixed, done)
