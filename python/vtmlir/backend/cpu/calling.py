"""The per-call path of a JIT-compiled function: memref descriptors in buffers built once.

The C interface of a bufferized `func.func` (`llvm.emit_c_interface`) takes one pointer per memref
to its descriptor ``{allocated, aligned, offset, sizes[rank], strides[rank]}`` (all 64-bit words);
`ExecutionEngine.raw_lookup("_mlir_ciface_f")` gives its packed wrapper, ``void f(void **args)``,
where ``args[i]`` points at the i-th descriptor pointer. Everything in that chain depends only on
the signature, so a `DescriptorTable` builds it once per thread: one int64 buffer holding every
descriptor (static sizes and dense strides already written), the descriptor pointers and the packed
argument array. A call then writes two words per buffer (its data pointer) and calls the wrapper
through a ctypes function built once -- no ctypes class, structure or pointer object per call
(torch_mlir's `get_ranked_memref_descriptor` builds a Structure class per array, ~100 µs a call).
The threads that call one executable concurrently each get their own table (ctypes releases the
GIL during the call). A function planned by `codegen-plan-workspace` takes one more memref, last: its
workspace (`memref<N x i8>`, every intermediate buffer at a static offset). The table allocates it
with the thread's descriptors, aligned as the plan asks, and writes its pointer once: each thread
keeps its own workspace for every later call, so its pages stay mapped (malloc and free per call
gave them back to the kernel, and each call faulted them in again), and concurrent calls never
share one. A parameter may also be a 64-bit integer passed by value (`SCALAR`: one word,
``args[i]`` points at it), as DVM's native VM takes its tile range (`dvm/native.py`).

Results come from `ResultBuffers`: a large result's memory is taken back from an earlier call once
nothing outside the executable references it any more, so a call that returns megabytes does not
fault in fresh pages (and give them back to the kernel) every time.
"""

from __future__ import annotations

import ctypes
import math
import sys
import threading

import numpy as np

_PACKED = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_WORD = 8  # bytes per descriptor word (pointer or i64) on the 64-bit hosts the JIT targets

_DESCRIPTOR_TYPES: dict[int, type] = {}

#: a `DescriptorTable` parameter that is an i64 passed by value rather than a memref
SCALAR = "i64"


def descriptor_type(rank: int) -> type:
    """The ctypes Structure of a rank-`rank` memref descriptor, one class per rank per process."""
    t = _DESCRIPTOR_TYPES.get(rank)
    if t is None:
        fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p), ("offset", ctypes.c_longlong)]
        if rank:
            fields += [("shape", ctypes.c_longlong * rank), ("strides", ctypes.c_longlong * rank)]
        t = _DESCRIPTOR_TYPES[rank] = type(f"MemRefDescriptor{rank}D", (ctypes.Structure,), {"_fields_": fields})
    return t


def data_pointer(array) -> int:
    """The address of a numpy array's first element. Through the buffer protocol for a writable
    C-contiguous array of at least one byte (several times faster than `array.ctypes.data` and
    `__array_interface__`, which build objects); the array interface otherwise."""
    try:
        return ctypes.addressof(_BYTE.from_buffer(array))
    except (TypeError, ValueError, BufferError):
        return array.__array_interface__["data"][0]


_BYTE = ctypes.c_char


def dense_strides(shape) -> list[int]:
    """Element strides of a C-contiguous array of `shape`."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    strides.reverse()
    return strides


class DescriptorTable:
    """The descriptors of one packed call with buffers of the given ranks (`shapes`: a shape per
    buffer, None for a dimension known only per call; or `SCALAR` for an i64 parameter), built once
    per thread.

    `words()` is the thread's int64 buffer: buffer i's data pointer goes to words `offsets[i]` and
    `offsets[i] + 1` (allocated and aligned), a scalar parameter's value to word `offsets[i]`;
    `set_shape` writes sizes and dense strides of a buffer whose shape is known only at the call
    (the sizes known now and the strides of the dimensions whose inner sizes are all known are
    written once). `call()` runs the function on them.

    `workspace` (bytes, alignment): the function's last parameter is a workspace of that many bytes
    (`codegen-plan-workspace`), not in `shapes`; each set of words (each thread's, each `fresh()`
    one) gets its own uninitialised buffer, allocated with the words and kept with them, its pointer
    written once."""

    def __init__(self, address: int, shapes: list, workspace: tuple[int, int] | None = None):
        self.function = _PACKED(address)  # takes the packed argument array's address
        self.workspace = workspace if workspace and workspace[0] > 0 else None
        if self.workspace is not None:
            shapes = list(shapes) + [(self.workspace[0],)]
        self.offsets: list[int] = []
        self._static: list[tuple[int, int]] = []  # (word, value) known now
        self._scalars = [s is SCALAR for s in shapes]
        self.ranks = [0 if s is SCALAR else len(s) for s in shapes]
        total = 0
        for shape in shapes:
            self.offsets.append(total)
            if shape is SCALAR:
                total += 1
                continue
            rank, acc = len(shape), 1
            for d in range(rank - 1, -1, -1):  # a stride is known where every inner size is
                if acc is not None:
                    self._static.append((total + 3 + rank + d, acc))
                n = shape[d]
                if n is not None:
                    self._static.append((total + 3 + d, n))
                acc = None if n is None or acc is None else acc * n
            total += 3 + 2 * rank
        self._total = total
        self._local = threading.local()

    def words(self):
        """This thread's descriptor words (see the class doc)."""
        try:
            return self._local.words
        except AttributeError:
            return self._build()[0]

    def state(self):
        """(words, the address of the packed argument array) of this thread."""
        try:
            return self._local.state
        except AttributeError:
            return self._build()

    def fresh(self):
        """A set of descriptor words of its own, not this thread's (a caller that keeps several
        argument sets ready, as DVM does per kernel): (words, the address of the packed argument
        array, what must stay alive with them)."""
        words = (ctypes.c_int64 * max(self._total, 1))()
        for word, value in self._static:
            words[word] = value
        base = ctypes.addressof(words)
        pointers = (ctypes.c_void_p * max(len(self.offsets), 1))(*[base + _WORD * o for o in self.offsets])
        # args[i]: the descriptor pointer of a memref, the word itself of a scalar
        packed = (ctypes.c_void_p * max(len(self.offsets), 1))(
            *[base + _WORD * o if scalar else ctypes.addressof(pointers) + _WORD * i
              for i, (o, scalar) in enumerate(zip(self.offsets, self._scalars))])
        keep = (pointers, packed)
        if self.workspace is not None:
            size, alignment = self.workspace
            buffer = aligned_empty((size,), np.uint8, alignment)
            o = self.offsets[-1]
            words[o] = words[o + 1] = buffer.__array_interface__["data"][0]
            keep += (buffer,)
        return words, ctypes.addressof(packed), keep

    def _build(self):
        words, address, keep = self.fresh()
        local = self._local
        local.keep = keep
        local.words = words
        local.state = (words, address)
        return local.state

    def set_shape(self, words, index: int, shape) -> None:
        o, r = self.offsets[index] + 3, self.ranks[index]
        words[o:o + 2 * r] = list(shape) + dense_strides(shape)

    def call(self) -> None:
        """Run the function on this thread's descriptors (filled by the caller)."""
        self.function(self._local.state[1])


#: results of at least this many bytes are recycled by `ResultBuffers`; smaller ones come from
#: malloc's free lists (numpy's own cache below 1 KiB), whose memory is already mapped
RECYCLE_BYTES = 64 * 1024


#: the alignment of the large result arrays: a cache line, which the kernels' streaming stores need
#: (`codegen-streaming-stores`: a large transposing copy writes whole lines past the cache only where
#: a line starts; numpy's large allocations start 16 bytes into a page)
RESULT_ALIGNMENT = 64


def aligned_empty(shape, dtype, alignment: int = RESULT_ALIGNMENT) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts at a multiple of `alignment` bytes (a view
    into a slightly larger buffer, which it keeps alive through `.base`)."""
    dtype = np.dtype(dtype)
    nbytes = dtype.itemsize * math.prod(shape)
    raw = np.empty(nbytes + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + nbytes].view(dtype).reshape(shape)


class ResultBuffers:
    """The arrays a call writes its results into: one per (shape, numpy dtype) of `specs`, C-contiguous,
    uninitialised (the compiled function writes every element of a result); the large ones start on
    a cache line (`RESULT_ALIGNMENT`).

    A fresh allocation of a large array is fresh memory: malloc maps it (or takes heap the previous
    call's free gave back to the kernel), and the call's first write to each 4 KiB page faults and
    zero-fills it -- measured at 5000 faults, ~10 ms, for a 64 MB KV-cache update that computes in
    15 ms. So an array of at least `RECYCLE_BYTES` is kept here after the call that returned it,
    and a later call on the same thread takes it again only when nothing else references it: the
    caller has dropped the result and every view of it (a torch tensor made by `torch.from_numpy`
    references it through its storage, a numpy view through `.base`, an exported buffer through the
    export). A result the caller still holds is never written again: that call gets a new array.
    Per result, the last `DEPTH` arrays are kept (2: a decode loop passes the previous call's
    result back in while the one before it is free), so after the caller drops every result the
    executable holds up to `DEPTH` of each large result per calling thread until it is itself freed
    or the thread ends -- torch's caching allocators do the same."""

    DEPTH = 2

    def __init__(self, specs):
        self._specs = [(tuple(shape), np.dtype(dtype)) for shape, dtype in specs]
        self._recycled = [np.dtype(dtype).itemsize * math.prod(shape) >= RECYCLE_BYTES for shape, dtype in specs]
        self._local = threading.local()
        if not any(self._recycled):  # small results only: numpy's allocations, nothing to look up
            self.arrays = self._fresh

    @property
    def recycles(self) -> bool:
        """Whether any result is large enough to be recycled (else `arrays` is a list of `np.empty`)."""
        return any(self._recycled)

    def _fresh(self) -> list:
        return [np.empty(shape, dtype) for shape, dtype in self._specs]

    def arrays(self) -> list:
        """This call's result arrays (see the class doc)."""
        try:
            held = self._local.held
        except AttributeError:  # per recycled result, the arrays kept for it on this thread
            held = self._local.held = [[] if r else None for r in self._recycled]
        out = []
        for (shape, dtype), kept in zip(self._specs, held):
            if kept is not None:
                for a in kept:
                    # Nothing but `kept` and this loop holds it, nor its buffer (a numpy view of the
                    # result references the buffer that owns the memory, not the result).
                    if sys.getrefcount(a) == _FREE and sys.getrefcount(a.base) == _BUFFER_FREE:
                        out.append(a)
                        break
                else:
                    a = aligned_empty(shape, dtype)
                    if len(kept) == self.DEPTH:
                        del kept[0]  # the caller holds it: no longer ours to reuse
                    kept.append(a)
                    out.append(a)
            else:
                out.append(np.empty(shape, dtype))
        return out


def _references_when_free() -> int:
    """What `sys.getrefcount` gives in `ResultBuffers.arrays`'s loop for an array only its list
    holds (3 on CPython 3.11: the list, the loop variable, the argument), measured the same way
    rather than assumed: an interpreter that counts stack references differently changes it."""
    kept = [np.empty(0)]
    for a in kept:
        return sys.getrefcount(a)


def _buffer_references_when_free() -> int:
    """The same for the buffer behind an `aligned_empty` array that nothing else references."""
    kept = [aligned_empty((1,), np.float32)]
    for a in kept:
        return sys.getrefcount(a.base)


_FREE = _references_when_free()
_BUFFER_FREE = _buffer_references_when_free()
