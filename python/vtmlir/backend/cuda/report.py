"""The CUDA kernel report (`compiled.report()`, `vtmlir compile --target cuda --report`).

Per kernel: the GPU schedule that made it (or "naive" with the reason), its launch shape, what
`ptxas -v` says it uses on sm_80 and sm_90 (registers, shared memory, spills), the occupancy that
follows (`GpuTarget.occupancy`), the bytes it moves and the flops it computes, and an H100 roofline
time: max(bytes / HBM bandwidth, flops / peak), datasheet peaks (`codegen/gpu/target.py`), tensor-core
peak for `mma-sync` and `tilus-mma` kernels and the f32 FMA peak for the others. The roofline time is an estimate, a
lower bound no kernel reaches; nothing here is measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...codegen.gpu.target import H100, gpu_target
from .ptxas import KernelResources, resource_usage

REPORT_ARCHS = ("sm_80", "sm_90")
# the schedules on tensor cores (their roofline peak is the f16 tensor-core rate)
TENSOR_CORE_SCHEDULES = ("mma-sync", "wgmma", "tilus-mma")


@dataclass(frozen=True)
class GpuKernelRow:
    """One kernel of the report."""

    name: str
    kernel_id: int | None
    kind: str
    description: str
    schedule: str              # "mma-sync", "wgmma", "simt", "vector", "tilus-mma", "tilus-fma", ... or "naive"
    detail: str                # the tiling, or why the kernel kept the naive mapping
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    resources: dict[str, KernelResources]      # per arch (sm_80 and sm_90, those the PTX assembles for)
    occupancy: dict[str, tuple[int, float]]    # per arch: (blocks per SM, fraction of warp slots)
    flops: int
    bytes: int

    @property
    def h100_estimate_s(self) -> float:
        """Roofline time on an H100 SXM (an estimate from datasheet peaks, not a measurement)."""
        peak = H100.f16_tensor_flops if self.schedule in TENSOR_CORE_SCHEDULES else H100.f32_flops
        return max(self.bytes / H100.hbm_bytes_per_s, self.flops / peak)


@dataclass(frozen=True)
class GpuReport:
    chip: str
    kernels: tuple[GpuKernelRow, ...]
    launch: str = ""   # how a call launches the kernels (`CudaExecutable.launch_mode`)

    @property
    def naive_contractions(self) -> list[GpuKernelRow]:
        """Contractions that kept the naive mapping (one thread per output element)."""
        return [k for k in self.kernels if k.kind == "contraction" and k.schedule == "naive"]

    @property
    def h100_estimate_s(self) -> float:
        return sum(k.h100_estimate_s for k in self.kernels)

    def summary(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for k in self.kernels:
            counts[k.schedule] = counts.get(k.schedule, 0) + 1
        return counts

    def __str__(self) -> str:
        schedules = ", ".join(f"{n} {s}" for s, n in sorted(self.summary().items()))
        lines = [f"{len(self.kernels)} CUDA kernels for {self.chip} ({schedules}); "
                 f"H100 roofline estimate {self.h100_estimate_s * 1e6:.2f} us (datasheet peaks, not measured)"]
        if self.launch:
            lines.append(f"launch: {self.launch}")
        for k in self.kernels:
            origin = f"kernel {k.kernel_id}: " if k.kernel_id is not None else ""
            lines.append(f"  {k.name}: {origin}{k.description} -> {k.schedule}"
                         + (f" ({k.detail})" if k.detail else ""))
            usage = []
            for arch in k.resources:
                r, (blocks, occupancy) = k.resources[arch], k.occupancy[arch]
                usage.append(f"{arch} {r.registers} regs {r.shared_bytes} B smem {r.spill_bytes} B spills "
                             f"occupancy {occupancy:.0%} ({blocks} blocks/SM)")
            lines.append(f"      grid {k.grid} block {k.block}; " + "; ".join(usage))
            lines.append(f"      {k.bytes} bytes, {k.flops} flops, H100 estimate {k.h100_estimate_s * 1e6:.3f} us")
        return "\n".join(lines)


def gpu_report(executable) -> GpuReport:
    """The report of a `CudaExecutable` (assembles every kernel with `ptxas -v` for sm_80 and sm_90,
    those not older than the chip it was compiled for: PTX for sm_90 does not assemble for sm_80;
    PTX for an architecture-specific chip, sm_90a, only for that chip)."""
    digits = "".join(ch for ch in executable.chip[3:] if ch.isdigit())
    archs = [a for a in REPORT_ARCHS if not digits or int(a[3:]) >= int(digits)] or [executable.chip]
    if executable.chip.endswith("a"):
        archs = [executable.chip]
    rows = []
    for kernel in executable.kernels:
        plan = kernel.plan
        threads = kernel.block[0] * kernel.block[1] * kernel.block[2]
        resources, occupancy = {}, {}
        for arch in archs:
            usage = resource_usage(kernel.ptx, arch, kernel.name)
            resources[arch] = usage
            occupancy[arch] = gpu_target(arch).occupancy(threads, usage.registers, usage.shared_bytes)
        if plan is None:
            kid, kind, description, detail, flops, moved = None, "unknown", "(not traced to a kernel)", "", 0, 0
        else:
            kid, kind, description, flops, moved = plan.id, plan.kind, plan.description, plan.flops, plan.bytes
            detail = plan.detail if kernel.scheduled else plan.reason
        rows.append(GpuKernelRow(kernel.name, kid, kind, description, kernel.schedule, detail, tuple(kernel.grid),
                                 tuple(kernel.block), resources, occupancy, flops, moved))
    return GpuReport(executable.chip, tuple(rows))
