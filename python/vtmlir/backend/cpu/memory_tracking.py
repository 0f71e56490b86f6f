"""Opt-in measurement of the memory a compiled CPU function allocates (TeMCO §2.2, §4.2).

TeMCO (Song et al., ICPP'24) reports the peak memory of *internal tensors* of a real inference, with
weight tensors counted apart. `compile_cpu(..., track_memory=True)` makes that measurable here:

- the LLVM stage lowers memref allocation with `finalize-memref-to-llvm{use-generic-functions}` before
  `convert-to-llvm`, so every `memref.alloc`/`memref.dealloc` becomes a call of
  `_mlir_memref_to_llvm_alloc` / `_mlir_memref_to_llvm_aligned_alloc` / `_mlir_memref_to_llvm_free`
  instead of `malloc`/`free`;
- those three symbols are bound in the JIT (`ExecutionEngine.raw_register_runtime`, before the first
  lookup materialises the code) to ctypes callbacks of a `CountingAllocator`, which forwards to the C
  library's `malloc`/`free` and records live and peak bytes per call of the function;
- weights (`memref.global`, i.e. LLVM globals) never go through the allocator and are summed from the
  kernel-level IR; inputs and outputs are the caller's arrays (outputs are out-parameters after
  `buffer-results-to-out-params`) and are reported apart as well.

The callbacks are Python: about a microsecond per allocation, and the JIT'd code is single-threaded.
That is why it is opt-in; without `track_memory` nothing here runs and the lowering is unchanged
(`malloc`/`free`). The callbacks are kept alive by the allocator, which the executable keeps alive.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass, field

from torch_mlir import ir

from ...ir_types import shaped_bytes
from ...ir_utils import walk_ops

# The generic allocation functions of MLIR's memref→LLVM lowering (MemRefToLLVM, use-generic-functions).
ALLOC_SYMBOL = "_mlir_memref_to_llvm_alloc"
ALIGNED_ALLOC_SYMBOL = "_mlir_memref_to_llvm_aligned_alloc"
FREE_SYMBOL = "_mlir_memref_to_llvm_free"

# Inserted into the "llvm" stage, right before `convert-to-llvm`, when memory is tracked.
GENERIC_ALLOCATION_PASS = "finalize-memref-to-llvm{use-generic-functions}"

_ALLOC_T = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint64)
_ALIGNED_ALLOC_T = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)
_FREE_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _libc():
    lib = ctypes.CDLL(ctypes.util.find_library("c") or None)
    lib.malloc.restype = ctypes.c_void_p
    lib.malloc.argtypes = [ctypes.c_size_t]
    lib.free.restype = None
    lib.free.argtypes = [ctypes.c_void_p]
    lib.aligned_alloc.restype = ctypes.c_void_p
    lib.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    return lib


@dataclass
class MemoryStats:
    """Memory of one call of a compiled function, in bytes.

    - `peak_internal_bytes`: the most bytes the function had allocated at once (internal tensors:
      everything it mallocs; TeMCO's "internal tensors" minus the caller's inputs and outputs);
    - `live_internal_bytes`: still allocated when the call returned (0 unless something leaks);
    - `allocations`, `frees`: counts; `timeline`: live internal bytes after each allocation or free;
    - `weight_bytes`: constants (LLVM globals), resident, never allocated by the call;
    - `input_bytes`, `output_bytes`: the caller's arrays (outputs are out-parameters; a result
      returned in a donated input's memory, `compile(..., donate=...)`, is counted once, as an input).
    """

    peak_internal_bytes: int = 0
    live_internal_bytes: int = 0
    allocations: int = 0
    frees: int = 0
    weight_bytes: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    timeline: list[int] = field(default_factory=list)

    @property
    def peak_bytes(self) -> int:
        """Internal peak plus the caller's inputs and outputs, all resident during the call."""
        return self.peak_internal_bytes + self.input_bytes + self.output_bytes

    def to_dict(self) -> dict:
        return {
            "peak_internal_bytes": self.peak_internal_bytes,
            "live_internal_bytes": self.live_internal_bytes,
            "allocations": self.allocations,
            "frees": self.frees,
            "weight_bytes": self.weight_bytes,
            "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes,
            "peak_bytes": self.peak_bytes,
        }


class CountingAllocator:
    """malloc/free that count bytes; bound to the JIT's generic allocation symbols.

    Sizes are remembered per pointer (the free callback only gets the pointer). `reset()` starts a new
    measurement with the bytes still live as the baseline.
    """

    def __init__(self):
        self._libc = _libc()
        self._sizes: dict[int, int] = {}
        self.live = 0
        self.peak = 0
        self.allocations = 0
        self.frees = 0
        self.timeline: list[int] = []
        # The ctypes function objects must outlive the engine: they are attributes of this object.
        self._alloc_cb = _ALLOC_T(self._alloc)
        self._aligned_alloc_cb = _ALIGNED_ALLOC_T(self._aligned_alloc)
        self._free_cb = _FREE_T(self._free)

    def reset(self) -> None:
        self.peak = self.live
        self.allocations = self.frees = 0
        self.timeline = []

    def _record(self, ptr: int, size: int) -> None:
        self._sizes[ptr] = size
        self.live += size
        self.peak = max(self.peak, self.live)
        self.allocations += 1
        self.timeline.append(self.live)

    def _alloc(self, size: int):
        ptr = self._libc.malloc(max(int(size), 1))
        if ptr:
            self._record(ptr, int(size))
        return ptr

    def _aligned_alloc(self, alignment: int, size: int):
        # C11 aligned_alloc wants size a multiple of alignment; MemRefToLLVM already rounds up.
        size = int(size)
        rounded = -(-max(size, 1) // alignment) * alignment
        ptr = self._libc.aligned_alloc(alignment, rounded)
        if ptr:
            self._record(ptr, size)
        return ptr

    def _free(self, ptr) -> None:
        if not ptr:
            return
        size = self._sizes.pop(ptr, 0)
        self.live -= size
        self.frees += 1
        self.timeline.append(self.live)
        self._libc.free(ptr)

    def bind(self, engine) -> None:
        """Register the three symbols in `engine`; call before anything is looked up in it."""
        for name, callback in (
            (ALLOC_SYMBOL, self._alloc_cb),
            (ALIGNED_ALLOC_SYMBOL, self._aligned_alloc_cb),
            (FREE_SYMBOL, self._free_cb),
        ):
            engine.raw_register_runtime(name, ctypes.cast(callback, ctypes.c_void_p))


def weight_bytes_of(kernel_module) -> int:
    """Bytes of the `memref.global` constants of a bufferized module (the weights)."""
    return sum(shaped_bytes(ir.TypeAttr(op.attributes["type"]).value) or 0
               for op in walk_ops(kernel_module) if op.name == "memref.global")
