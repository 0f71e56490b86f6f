"""Device memory of the CUDA driver stand-ins in the tests (test_cuda_graph.py, test_dvm_cuda.py):
"device" addresses are host buffers, and every copy is checked to stay inside one allocation."""

from __future__ import annotations

import ctypes

import numpy as np


class HostMemory:
    """`cuMemAlloc`, `cuMemFree`, `cuMemcpyHtoD` and `cuMemcpyDtoH` on host buffers. A subclass
    sets `SUCCESS`, the CUresult its calls return."""

    SUCCESS = 0

    def __init__(self):
        self.memory: dict[int, np.ndarray] = {}

    def cuMemAlloc(self, nbytes):
        buffer = np.zeros(nbytes, np.uint8)
        self.memory[buffer.ctypes.data] = buffer
        return (self.SUCCESS, buffer.ctypes.data)

    def cuMemFree(self, address):
        del self.memory[int(address)]
        return (self.SUCCESS,)

    def _within(self, address, nbytes):
        base = max((a for a in self.memory if a <= address), default=None)
        assert base is not None and address + nbytes <= base + self.memory[base].size, "outside any allocation"

    def cuMemcpyHtoD(self, device, host, nbytes):
        self._within(int(device), nbytes)
        ctypes.memmove(int(device), host, nbytes)
        return (self.SUCCESS,)

    def cuMemcpyDtoH(self, host, device, nbytes):
        self._within(int(device), nbytes)
        ctypes.memmove(host, int(device), nbytes)
        return (self.SUCCESS,)
