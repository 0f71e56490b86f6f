"""NVIDIA GPUs as the GPU schedules see them: resource limits per chip and the datasheet peaks.

The schedules need the limits an SM imposes on a block (threads, registers, shared memory), from
which `occupancy` follows, and the peak throughputs the roofline estimate of the report divides by.
Figures are NVIDIA's published ones (CUDA C Programming Guide, "Compute capabilities" table; the
A100 and H100 SXM datasheets); nothing here is measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import VtmlirError


@dataclass(frozen=True)
class GpuTarget:
    """One chip: `sm` is the compute capability as an int (80, 90), limits per SM and per block."""

    chip: str
    sm: int
    name: str
    sms: int                        # streaming multiprocessors
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_allocation_unit: int = 256   # registers are allocated per warp in units of 256
    shared_per_sm: int = 0          # bytes usable by blocks (carve-out maximum)
    shared_per_block_static: int = 48 * 1024   # static __shared__ limit (more needs dynamic shared memory)
    shared_per_block_reserved: int = 1024      # the driver reserves 1 KiB per block (sm_80+)
    warp_size: int = 32
    hbm_bytes_per_s: float = 0.0    # datasheet memory bandwidth
    f16_tensor_flops: float = 0.0   # dense f16/bf16 tensor-core peak (f32 accumulate)
    f32_flops: float = 0.0          # f32 FMA peak (CUDA cores)

    @property
    def tensor_cores(self) -> bool:
        return self.sm >= 80

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    def occupancy(self, threads: int, registers: int, shared_bytes: int) -> tuple[int, float]:
        """(blocks per SM, fraction of the SM's warp slots in use) for a block of `threads` threads
        using `registers` per thread and `shared_bytes` of shared memory (the occupancy calculator's
        rules: per-warp register allocation in units of 256, 1 KiB reserved per block)."""
        if threads <= 0:
            return 0, 0.0
        warps = -(-threads // self.warp_size)
        limits = [self.max_blocks_per_sm, self.max_warps_per_sm // warps]
        if registers:
            per_warp = -(-registers * self.warp_size // self.register_allocation_unit) * self.register_allocation_unit
            limits.append(self.registers_per_sm // (per_warp * warps))
        if shared_bytes:
            limits.append(self.shared_per_sm // (shared_bytes + self.shared_per_block_reserved))
        blocks = max(0, min(limits))
        return blocks, blocks * warps / self.max_warps_per_sm


# The chips the schedules are tuned for; other sm_8x/sm_9x names resolve to the nearest one.
A100 = GpuTarget("sm_80", 80, "A100 SXM4 80GB", sms=108, shared_per_sm=164 * 1024,
                 hbm_bytes_per_s=2.039e12, f16_tensor_flops=312e12, f32_flops=19.5e12)
H100 = GpuTarget("sm_90", 90, "H100 SXM5", sms=132, shared_per_sm=228 * 1024,
                 hbm_bytes_per_s=3.35e12, f16_tensor_flops=989e12, f32_flops=67e12)
TARGETS = {"sm_80": A100, "sm_90": H100}
_ALIASES = {"sm_86": "sm_80", "sm_87": "sm_80", "sm_89": "sm_80", "sm_90a": "sm_90"}


def gpu_target(chip: str) -> GpuTarget | None:
    """The `GpuTarget` for a `chip=` name (sm_80, sm_90, ...); None for chips before sm_80, which have
    neither `cp.async` nor bf16 `mma.sync` (their kernels keep the naive mapping, reported as such)."""
    name = _ALIASES.get(chip, chip)
    if name in TARGETS:
        return TARGETS[name]
    if chip.startswith("sm_") and chip[3:5].isdigit() and int(chip[3:5]) < 80:
        return None
    raise VtmlirError(f"error: no GPU target '{chip}' (supported: sm_70 ... sm_90a)")
