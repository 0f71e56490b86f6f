"""CPU backend: kernel-level IR → LLVM dialect → MLIR ExecutionEngine (LLVM JIT)."""

from .executable import CpuExecutable, compile_cpu

__all__ = ["CpuExecutable", "compile_cpu"]
