"""benchmarks/gpu.py's Tilus group up to the driver call (no GPU here): the prepared case holds an
assembled cubin and what the GPU machine needs to rebuild the kernel's buffers, the rebuilt buffers
equal the ones the kernel was built with, and their order matches the kernel's parameters."""

from __future__ import annotations

import ctypes
import os
import pickle
import re

import pytest

@pytest.fixture(scope="module")
def gpu_bench(load_benchmark):
    module = load_benchmark("gpu")
    module.TILUS_SHAPES = ((128, 64, ("u4",)),)   # K, N: small, same code path as 4096 x 4096
    return module


def test_prepared_tilus_cases_rebuild_their_buffers_in_parameter_order(gpu_bench, tmp_path, capsys):
    gpu_bench.prepare_tilus(str(tmp_path), None, "sm_90")
    cases = sorted(f[:-5] for f in os.listdir(tmp_path) if f.endswith(".case"))
    assert cases == sorted(case for case, *_ in gpu_bench.tilus_cases())
    assert {c.split("_")[2] + c.split("_")[3] for c in cases} == {"mmam16", "mmam64", "fmam1", "fmam64"}
    for case in cases:
        meta = pickle.loads((tmp_path / f"{case}.case").read_bytes())
        assert (tmp_path / f"{case}.cubin").read_bytes().startswith(b"\x7fELF")
        qweight, x, arrays, match = gpu_bench.tilus_buffers(meta)
        assert match, case   # the same packed codes, scales, zero points and x as at build time
        assert x.shape == (meta["m"], meta["k"]) and qweight.codes.shape == (meta["n"], meta["k"])
        ptx = (tmp_path / f"{case}.ptx").read_text()
        entry = re.search(r"\.entry\s+(\w+)\s*\(([^)]*)\)", ptx)
        assert entry.group(1) == meta["function"]
        assert len(re.findall(r"\.param\s+\.u64", entry.group(2))) == len(arrays) + 1   # ... and y
        pointers = [0x1000 * (i + 1) for i in range(len(arrays) + 1)]
        from vtmlir.lowbit.gpu_matmul import launch_parameters

        slots, params = launch_parameters(pointers)
        assert [ctypes.cast(params[i], ctypes.POINTER(ctypes.c_void_p)).contents.value
                for i in range(len(pointers))] == pointers
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(cases) and all('"metric": "compile_time"' in line and '"spill_bytes": 0' in line
                                            for line in lines)
