"""The DVM virtual machine compiled once to native CPU code through vtmlir's MLIR pipeline (Fang et
al., DVM, §4.3: "the VM ... is compiled once"; Alg. 2).

`native_vm()` builds the MLIR of `native_mlir.build_vm_module()`, lowers it with the CPU backend's
stages (`backend.cpu.lower.CPU_STAGES`) and JIT-compiles it with the MLIR ExecutionEngine -- once
per process (the engine is cached). Running a program afterwards costs only the call: a new shape
is tiling + encoding (`compile.compile_graph`) and then `run(bytecode, args)`.

Cores (Alg. 2 lines 2-5): core c of N runs tiles ``[m*c, min(M, m*(c+1)))`` with ``m = ceil(M/N)`` on
its own local memory; the cores are host threads calling the compiled entry concurrently (ctypes
releases the GIL during the call). `@dvm_seq` runs several programs back to back in one call on one
core (`Sequence`: a `DvmFunction` shape's replay, `replay.py`).
"""

from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from torch_mlir import ir

from ..backend.cpu.calling import SCALAR, DescriptorTable, data_pointer
from ..backend.cpu.executable import create_engine
from ..backend.cpu.lower import lower_to_llvm
from ..errors import VtmlirError
from .bytecode import BytecodeError, decode
from .isa import BINARY_OPS, REDUCE_OPS, SCALAR_OPS, DType, Opcode, Program
from .native_mlir import ARITH_TYPES, CASTS, MAX_DIMS, build_vm_module, handled_opcodes

#: instructions whose element type must be one of `ARITH_TYPES` (Cmp, Select, Cast and the data
#: movement take every dtype)
ARITH_OPS = (BINARY_OPS | SCALAR_OPS | REDUCE_OPS
              | {Opcode.SQRT, Opcode.ABS, Opcode.LOG, Opcode.EXP, Opcode.ROUND, Opcode.FLOOR,
                 Opcode.IS_FINITE, Opcode.MATMUL})


def unsupported_reason(program: Program) -> str | None:
    """Why the native VM cannot run `program` (None if it can). Arithmetic is on the float types
    (f16 computed in f32); data movement, Cmp, Select and Cast take every dtype.
    Remembered on the (immutable) program: every native run asks, and a scan of the body costs
    more than a small kernel's run."""
    reason = program.__dict__.get("_native_reason", _UNSET)
    if reason is _UNSET:
        reason = _unsupported_reason(program)
        object.__setattr__(program, "_native_reason", reason)
    return reason


_UNSET = object()


def _unsupported_reason(program: Program) -> str | None:
    if len(program.grid) > MAX_DIMS:
        return f"{len(program.grid)} grid dimensions (at most {MAX_DIMS})"
    ops = handled_opcodes()
    for ins in program.body:
        if ins.op not in ops:
            return f"opcode {ins.op.name}"
        if ins.op in ARITH_OPS and ins.dtype not in ARITH_TYPES:
            return f"{ins.op.name} on {ins.dtype.name} (native arithmetic is f16/f32/f64)"
        if ins.op == Opcode.CAST and (ins.src_dtype, ins.dst_dtype) not in CASTS:
            return f"CAST {ins.src_dtype.name} -> {ins.dst_dtype.name}"
        if ins.op in (Opcode.VIEW_LOAD, Opcode.VIEW_STORE) and len(ins.sizes) > MAX_DIMS:
            return f"{ins.op.name} of {len(ins.sizes)} dimensions (at most {MAX_DIMS})"
    return None


# `raw_lookup("_mlir_ciface_dvm_vm")` is the packed wrapper ``_mlir__mlir_ciface_dvm_vm(void **args)``:
# args[i] points at the i-th argument of the C interface (a descriptor pointer or an i64):
# code, local, the argument table, t0, t1 -- a `DescriptorTable` of the CPU call path.
_PARAMS = [(None,), (None,), (None,), SCALAR, SCALAR]
_SEQ_PARAMS = [(None,), (None,), (None,)]  # @dvm_seq: the codes, local memory, the argument tables
_HEADER = 9  # fixed header words (`bytecode`): the argument descriptors follow
_NUMPY = {int(d): d.numpy for d in DType}
# the words of the parameters in the table: three memref<?xT> descriptors (allocated, aligned,
# offset, size, stride), t0, t1
_CODE, _LOCAL, _ARGS, _T0, _T1 = 0, 5, 10, 15, 16


class _Frame:
    """One thread's arguments of @dvm_vm: the `DescriptorTable` words (built once per thread by
    `backend/cpu/calling.py`) and the growable argument table (one memref descriptor of five words
    per program argument). A call writes words; no ctypes object is created."""

    __slots__ = ("words", "address", "table", "table_address", "keep")

    def __init__(self, state, keep=None):
        self.words, self.address = state
        self.keep = keep  # a prepared frame's pointer arrays and local memory
        self.table = (ctypes.c_int64 * 0)()
        self.table_address = 0

    def table_for(self, nargs: int):
        """The argument table with room for `nargs` descriptors (offsets and strides written)."""
        if len(self.table) < 5 * nargs:
            self.table = (ctypes.c_int64 * (5 * max(nargs, 8)))()
            for i in range(len(self.table) // 5):
                self.table[5 * i + 4] = 1
            self.table_address = ctypes.addressof(self.table)
        return self.table


class NativeVM:
    """The JIT-compiled VM. `stages` holds the IR after every lowering stage ("vm", "loops", "llvm")."""

    def __init__(self, opt_level: int = 3):
        self._ctx = ir.Context()
        with self._ctx, ir.Location.unknown():
            module = build_vm_module()
            self.source = str(module)
            self.stages: dict[str, str] = {"vm": self.source}

            def record(stage, mod):
                self.stages[stage] = str(mod)

            lower_to_llvm(module, record)
            self._engine = create_engine(module, opt_level)
        addr = self._engine.raw_lookup("_mlir_ciface_dvm_vm")
        if not addr:
            raise VtmlirError("error: the LLVM JIT could not materialise @dvm_vm")
        self._params = DescriptorTable(addr, _PARAMS)
        self._entry = self._params.function
        seq = self._engine.raw_lookup("_mlir_ciface_dvm_seq")
        if not seq:
            raise VtmlirError("error: the LLVM JIT could not materialise @dvm_seq")
        self._seq_params = DescriptorTable(seq, _SEQ_PARAMS)
        self._module = module
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()

    def _scratch(self, nbytes: int) -> np.ndarray:
        """This thread's local memory of at least `nbytes`. A larger one replaces it, but the
        smaller ones stay allocated: a prepared frame (`prepared_frame`) may still hold one, as
        large as its program needs (they grow geometrically: at most twice the largest in all)."""
        buf = getattr(self._local, "buf", None)
        if buf is None or buf.size < nbytes:
            buf = np.zeros(max(nbytes, 4096, 2 * (0 if buf is None else buf.size)), dtype=np.uint8)
            self._local.__dict__.setdefault("kept", []).append(buf)
            self._local.buf = buf
            self._local.buf_address = data_pointer(buf)
        return buf

    def prepared_frame(self, code_address: int, code_size: int, nargs: int, tiles: int, local_bytes: int) -> _Frame:
        """A frame of its own for one program run on one core of the calling thread, everything but
        the argument pointers written (`kernel._NativeCall`): code, argument table (room for
        `nargs`), local memory of this thread, tiles [0, tiles). Run it with `run_prepared` on
        that thread only."""
        words, address, keep = self._params.fresh()
        local = self._scratch(max(local_bytes, 1))
        # the frame holds its local memory too: a thread that ends frees its own, and a later
        # thread may get the same ident
        frame = _Frame((words, address), (keep, local))
        frame.table_for(nargs)
        words[_CODE] = words[_CODE + 1] = code_address
        words[_CODE + 3] = code_size
        words[_ARGS] = words[_ARGS + 1] = frame.table_address
        words[_ARGS + 3] = nargs
        words[_LOCAL] = words[_LOCAL + 1] = self._local.buf_address
        words[_LOCAL + 3] = local.size
        words[_T0], words[_T1] = 0, tiles
        return frame

    def sequence(self, kernels, tables) -> Sequence:
        """A `Sequence` of kernels run one after another in one native call on the calling
        thread (`@dvm_seq`): `kernels` is (code array, local bytes) per kernel, valid bytecode
        known to be natively supported (`run_valid`'s contract; every tile of the header's count
        runs); `tables` the argument table of each (five int64 words per argument,
        `_Frame.table_for`'s layout). The caller writes the argument pointers into the tables and
        calls `Sequence.run`."""
        return Sequence(self, kernels, tables)

    def run_prepared(self, frame: _Frame) -> None:
        """Run a `prepared_frame` (its argument table filled) on the calling thread."""
        self._entry(frame.address)

    def _frame(self) -> _Frame:
        try:
            return self._local.frame
        except AttributeError:
            frame = self._local.frame = _Frame(self._params.state())
            return frame

    def run(self, bytecode, args, cores: int | None = 1, program: Program | None = None) -> None:
        """Run a bytecode program on 1-d dense argument arrays (inputs then outputs, header order),
        writing the outputs in place. The bytecode is validated by `decode` unless its decoded
        `program` is given (the caller vouches that it is ``decode(bytecode)``). `cores` is N of
        Alg. 2 (None: the CPU count)."""
        code = np.ascontiguousarray(bytecode, dtype=np.int64)
        if program is None:
            program = decode(code)
        reason = unsupported_reason(program)
        if reason is not None:
            raise BytecodeError(f"dvm native vm: error: unsupported program: {reason}")
        self._launch(code, args, cores, program.tile_count, program.local_bytes,
                     [(d.dtype.numpy, d.numel) for d in program.args], data_pointer(code))

    def run_valid(self, code: np.ndarray, args, cores: int | None = 1) -> None:
        """`run` for bytecode known to be valid and natively supported without decoding it: a
        template's words (`CompiledKernel.native_reason`; the template's guards hold `decode`'s
        checks, `bytecode.check_traced`). The header is read from the words as they stand; the
        arguments are checked against it (count, dtype, length, density) as in `run`."""
        self._launch(code, args, cores, *launch_header(code))

    def _launch(self, code, args, cores, M, local_bytes, arg_descs, code_address) -> None:
        """Alg. 2 on `code` (its first word at `code_address`): `M` tiles over N cores; `arg_descs`
        is (numpy dtype, element count) per argument, from the header (`launch_header`)."""
        if len(args) != len(arg_descs):
            raise BytecodeError(f"dvm native vm: error: program takes {len(arg_descs)} arguments, got {len(args)}")
        frame = self._frame()
        # the argument table of @dvm_vm: one memref<?xi8> descriptor (five words) per argument, in
        # header order, so that a record's argument number indexes it
        table = frame.table_for(len(arg_descs))
        j = 0
        for i, (a, (dt, numel)) in enumerate(zip(args, arg_descs)):
            if (not isinstance(a, np.ndarray) or a.ndim != 1 or a.dtype != dt or a.size < numel
                    or (a.size > 1 and a.strides[0] != a.itemsize)):
                raise BytecodeError(f"dvm native vm: error: argument {i} must be a dense 1-d "
                                    f"{dt} array of at least {numel} elements")
            table[j] = table[j + 1] = data_pointer(a)
            table[j + 3] = a.nbytes
            j += 5
        self._dispatch(frame, code_address, code.size, len(arg_descs), M, local_bytes, cores)

    def _dispatch(self, frame: _Frame, code_address: int, code_size: int, nargs: int, M: int, local_bytes: int,
                  cores) -> None:
        """Run the program at `code_address` on the arguments in `frame`'s table: Alg. 2, M tiles
        over N cores."""
        words = frame.words
        words[_CODE] = words[_CODE + 1] = code_address
        words[_CODE + 3] = code_size
        words[_ARGS] = words[_ARGS + 1] = frame.table_address
        words[_ARGS + 3] = nargs
        # M: Alg. 2 line 3
        N = 1 if cores == 1 else max(1, min(M, cores or os.cpu_count() or 1))  # line 2
        nbytes = max(local_bytes, 1)
        if N == 1:
            self._core(frame, nbytes, 0, M)
            return
        m = -(-M // N)  # line 4

        def core(c):
            own = self._frame()
            if own is not frame:  # the launching thread's code and argument table (its own local memory)
                own.words[_CODE:_CODE + 5] = words[_CODE:_CODE + 5]
                own.words[_ARGS:_ARGS + 5] = words[_ARGS:_ARGS + 5]
            self._core(own, nbytes, m * c, min(M, m * (c + 1)))  # line 5

        if self._pool is None or self._pool._max_workers < N:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
            self._pool = ThreadPoolExecutor(max_workers=N)
        list(self._pool.map(core, range(N)))

    def _core(self, frame: _Frame, nbytes: int, t0: int, t1: int) -> None:
        """Run tiles [t0, t1) on this thread's local memory (`frame` is this thread's)."""
        words = frame.words
        if words[_LOCAL + 3] < nbytes:
            local = self._scratch(nbytes)
            words[_LOCAL] = words[_LOCAL + 1] = self._local.buf_address
            words[_LOCAL + 3] = local.size
        words[_T0], words[_T1] = t0, t1
        self._entry(frame.address)


class Sequence:
    """Kernels run back to back in one native call (`NativeVM.sequence`): the codes and the
    argument tables as two tables of memref descriptors (the parameters of `@dvm_seq`), written
    once, and this thread's local memory, as large as the largest kernel needs. A run writes no
    word: the caller has written the argument pointers into `tables`."""

    __slots__ = ("vm", "address", "kernels", "keep", "_function")

    def __init__(self, vm: NativeVM, kernels, tables):
        def descriptors(rows):  # memref<?xT> descriptors: allocated, aligned, offset, size, stride
            words = (ctypes.c_int64 * max(5 * len(rows), 5))()
            for j, (address, size) in enumerate(rows):
                words[5 * j:5 * j + 5] = [address, address, 0, size, 1]
            return words

        codes = descriptors([(data_pointer(code), code.size) for code, _ in kernels])
        arg_tables = descriptors([(ctypes.addressof(t), len(t) // 5) for t in tables])
        local = vm._scratch(max([1] + [b for _, b in kernels]))
        words, self.address, keep = vm._seq_params.fresh()
        for at, (array, size) in ((_CODE, (codes, len(kernels))), (_LOCAL, (local, local.size)),
                                  (_ARGS, (arg_tables, len(tables)))):
            address = array.ctypes.data if isinstance(array, np.ndarray) else ctypes.addressof(array)
            words[at:at + 5] = [address, address, 0, size, 1]
        self.vm, self.kernels = vm, list(kernels)
        self.keep = (words, keep, codes, arg_tables, local, tables)
        self._function = vm._seq_params.function

    def run(self) -> None:
        self._function(self.address)


def launch_header(code: np.ndarray) -> tuple:
    """(tile count M, local bytes, (numpy dtype, element count) per argument, the address of the
    first word) from the header of bytecode `code`, with the checks `run_valid` needs of the words
    themselves. Valid while `code` lives (`CompiledKernel` keeps both)."""
    if code.dtype != np.int64 or not code.flags.c_contiguous or code.size < _HEADER:
        raise BytecodeError("dvm native vm: error: bytecode must be a contiguous int64 array")
    nargs = int(code[7])
    if not 0 <= nargs <= (code.size - _HEADER) // 2:
        raise BytecodeError(f"dvm native vm: error: {nargs} arguments in the header of {code.size} words")
    head = code[:_HEADER + 2 * nargs].tolist()
    descs = [(_NUMPY[head[_HEADER + 2 * i]], head[_HEADER + 2 * i + 1]) for i in range(nargs)]
    return head[5], head[6], descs, data_pointer(code)


_VM: NativeVM | None = None
_LOCK = threading.Lock()


def native_vm() -> NativeVM:
    """The process-wide native VM, compiled at the first call (≈ a second) and cached."""
    global _VM
    if _VM is not None:  # every native run asks: no lock once it exists
        return _VM
    with _LOCK:
        if _VM is None:
            _VM = NativeVM()
        return _VM


def run(bytecode, args, cores: int | None = 1, program: Program | None = None) -> None:
    """`NativeVM.run` on the cached VM."""
    native_vm().run(bytecode, args, cores=cores, program=program)


def run_valid(code: np.ndarray, args, cores: int | None = 1) -> None:
    """`NativeVM.run_valid` on the cached VM (valid, supported bytecode: not decoded)."""
    native_vm().run_valid(code, args, cores=cores)
