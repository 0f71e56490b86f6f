"""vtmlir.dvm: the DVM runtime operator compiler (Fang et al., "DVM: Real-Time Kernel Generation
for Dynamic AI Models"; see docs/dvm.md).

For every new shape, a basic-operator `Graph` is tiled (`tiling`, Alg. 1) and encoded into tile-level
bytecode (`isa` Table 1, `bytecode` Fig. 7) -- no machine code is generated; a virtual machine
(`vm`, Alg. 2) interprets it.

    g = Graph("add"); x = g.input(2); y = g.input(2); g.output(g.sqrt(x + y))
    k = compile_graph(g, [(32, 1024), (32, 1024)])   # tiling + encoding only
    out, = k(a, b)                                    # the reference VM

Whole functions: `fuse` (the `dvm-fuse` pass, symbol deduction in `symbols`) groups linalg ops into
kernels and `runner.DvmFunction` runs them; `stream.StreamFuser` fuses dynamic graphs at run time.
"""

from .bytecode import BytecodeError, decode, encode
from .compile import compile_graph
from .kernel import CompiledKernel
from .graph import Graph, GraphError, Value
from .isa import ArgDesc, CmpType, DType, GridDim, Instr, KernelType, Opcode, Program, make
from .tiling import (
    MatmulTiling,
    Target,
    TilingError,
    VectorTiling,
    hardware_align_div,
    min_cost_tile,
    tile_cost,
    tile_matmul,
    tile_vector,
)
from .vm import execute

__all__ = [
    "ArgDesc", "BytecodeError", "CmpType", "CompiledKernel", "DType", "Graph", "GraphError",
    "GridDim", "Instr", "KernelType", "MatmulTiling", "Opcode", "Program", "Target", "TilingError",
    "Value", "VectorTiling", "compile_graph", "decode", "encode", "execute", "hardware_align_div",
    "make", "min_cost_tile", "tile_cost", "tile_matmul", "tile_vector",
]
