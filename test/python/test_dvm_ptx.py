"""The DVM VM lowered once through vtmlir's CUDA path (one thread block per tile) assembles with
ptxas for sm_80 and sm_90 (the sm_80 PTX is valid input for sm_90's ptxas; generating it once keeps
the test at ~20 s)."""

from __future__ import annotations

import re

import pytest

from vtmlir.dvm.gpu import vm_ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_vm_ptx_assembles(arch):
    k = vm_ptx("sm_80")
    assert ".target sm_80" in k.ptx and f".entry {k.kernel}" in k.ptx
    assert "gpu.launch_func" in k.stages["outline"]  # the tile loop became the grid
    assert "memref<?xmemref<?xi8>>" in k.stages["outline"]  # the argument table, any length
    assert re.search(r"%ctaid\.x", k.ptx)  # one thread block per tile
    assert len(k.assemble(arch)) > 1000
