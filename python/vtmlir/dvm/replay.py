"""Every kernel of one argument shape in one native call: the steady state of `DvmFunction`.

A `DvmFunction` call walks its plan in Python: numpy glue, then per kernel a cache lookup, a
launch and the conversion of its results. For a given argument shape all of that is the same on
every call except the argument data and the fresh result buffers, so the second call of a shape
records its launches (`DvmFunction` passes the list to `_GroupKernel.run`) and `ShapeReplay.of`
turns them into a `native.Sequence`: the kernels' codes and argument tables written once, the
intermediate buffers allocated once, and per call only the argument and result pointers written
before one call of `@dvm_seq` (no Python between the kernels, no glue, no lookup).

What a recording proves is checked, not assumed: every buffer a kernel reads is located by its
address in exactly one of the function's arguments, an earlier kernel's output or a constant the
function holds (a constant, or a view of one taken once: `_GroupKernel.bind`), and every result
the function returns is a whole kernel output; glue that computed data per call (a copy, a fill,
a batch_matmul's per-slice kernels) leaves a buffer nothing locates, so the shape is not
replayed. The glue skipped is then shape arithmetic (`tensor.dim`, index ops, `cf.assert` on
them) and views, the same for every call of the shape. Kernels that ran on the numpy VM, on
several cores or through the checked path (`kernel._NativeCall` declined) are not replayed either.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ..backend.cpu.calling import ResultBuffers, data_pointer
from .native import native_vm


class ShapeReplay:
    """One argument shape of a `DvmFunction` as one native call. `results` (shape, numpy dtype)
    per buffer the caller allocates per call, `returned` the index of that buffer for each result
    of the function; `run(pointers)` takes the data pointers of the arguments, then of those
    buffers. Usable on the thread that recorded it (`owner`: the tables are its state)."""

    __slots__ = ("sequence", "writes", "results", "returned", "owner", "dtypes", "keep", "buffers")

    @classmethod
    def of(cls, arrays, launches, returned, constants: list) -> ShapeReplay | None:
        """The replay of a recorded call (see the module doc), or None where the call cannot be
        replayed. `arrays`: the function's arguments (C-contiguous); `launches`: per kernel run
        (CompiledKernel, input arrays, output arrays, whether its prepared one-core native call
        ran); `returned`: the function's result arrays; `constants`: `spans` of the arrays that
        live as long as the function."""
        if not launches or not all(ok for *_, ok in launches):
            return None
        # every buffer a kernel input may lie in: (start address, bytes, source); source is
        # ("arg", i), ("out", k, j) or ("const", array)
        spans = [(data_pointer(a), a.nbytes, ("arg", i)) for i, a in enumerate(arrays) if a.nbytes] + constants
        outputs = {}  # ("out", k, j) -> the recorded array
        kernels, tables, uses = [], [], []
        for k, (kernel, inputs, outs, _) in enumerate(launches):
            table = (ctypes.c_int64 * (5 * (len(inputs) + len(outs))))()
            for j, a in enumerate(list(inputs) + list(outs)):
                if not a.nbytes:
                    return None
                address = data_pointer(a)
                table[5 * j:5 * j + 5] = [address, address, 0, a.nbytes, 1]
                if j < len(inputs):
                    found = [(source, address - start) for start, size, source in spans
                             if start <= address and address + a.nbytes <= start + size]
                    if not found:  # computed per call by glue
                        return None
                    if len(found) > 1 and any(source[0] != "const" for source, _ in found):
                        return None  # ambiguous: aliased arguments (constants and their views may share memory)
                    uses.append((table, 5 * j, *found[0]))
                else:
                    source = ("out", k, j - len(inputs))
                    outputs[source] = a
                    spans.append((address, a.nbytes, source))
                    uses.append((table, 5 * j, source, 0))
            kernels.append((kernel.bytecode, kernel.native_call.local_bytes))
            tables.append(table)
        fresh: dict = {}  # output source -> its index among the per-call buffers
        results, order = [], []
        for r in returned:
            if not r.nbytes or not r.flags.c_contiguous:
                return None
            address = data_pointer(r)
            found = [source for start, size, source in spans if start == address and size == r.nbytes]
            if len(found) != 1 or found[0][0] != "out":
                return None  # an argument, a constant or part of an output returned: not replayed
            source = found[0]
            if source not in fresh:
                fresh[source] = len(results)
                results.append((r.shape, r.dtype))
            elif results[fresh[source]][0] != r.shape:
                return None
            order.append(fresh[source])
        self = cls()
        self.results, self.returned = results, order
        self.buffers = ResultBuffers(results)  # a large result's memory recycled once the caller drops it
        self.dtypes = [a.dtype for a in arrays]
        # words written per call: an argument's or a fresh output's address (+ offset); the
        # other outputs (intermediates) keep the buffers of the recording, allocated once
        n = len(arrays)
        self.writes = []
        for table, word, source, offset in uses:
            if source[0] == "arg":
                self.writes.append((table, word, source[1], offset))
            elif source[0] == "out" and source in fresh:
                self.writes.append((table, word, n + fresh[source], offset))
        kept = [a for source, a in outputs.items() if source not in fresh]
        self.sequence = native_vm().sequence(kernels, tables)
        self.owner = threading.get_ident()
        self.keep = (kept, [source[1] for *_, source in constants], [k for k, *_ in launches])
        return self

    def accepts(self, arrays) -> bool:
        """Whether a call with `arrays` (of the recorded shapes, C-contiguous) can be replayed
        here: the recorded dtypes, on the recording thread."""
        if threading.get_ident() != self.owner:
            return False
        for a, dt in zip(arrays, self.dtypes):
            if a.dtype != dt:
                return False
        return True

    def run(self, pointers) -> None:
        """Run every kernel: `pointers` are the arguments' data pointers, then the per-call
        buffers' (`results`), each of the recorded shape and dtype, C-contiguous."""
        for table, word, source, offset in self.writes:
            table[word] = table[word + 1] = pointers[source] + offset
        self.sequence.run()

    def __call__(self, arrays):
        """Run on numpy arguments (already checked against the recorded shapes, dtypes and
        contiguity by the caller); the function's results."""
        outs = self.buffers.arrays()
        self.run([data_pointer(a) for a in arrays] + [data_pointer(o) for o in outs])
        return [outs[r] for r in self.returned]


def spans(constants) -> list:
    """(address, extent in bytes, ("const", array)) of each non-empty array of `constants`, what
    `ShapeReplay.of` locates buffers in besides the arguments and outputs."""
    return [(data_pointer(c), _extent(c), ("const", c)) for c in constants if _extent(c)]


def _extent(a: np.ndarray) -> int:
    """The bytes from `a`'s first element to the end of its last (0: empty, or a negative stride,
    which no view the runner takes has): a constant's broadcast view spans less than its nbytes."""
    if a.flags.c_contiguous or not a.size:
        return a.nbytes
    if any(s < 0 for s in a.strides):
        return 0
    return a.itemsize + sum((n - 1) * s for n, s in zip(a.shape, a.strides))
