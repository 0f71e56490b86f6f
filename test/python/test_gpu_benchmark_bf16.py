"""benchmarks/gpu.py prepares bf16 cases for a lent GPU (no GPU here): the bf16 kernels and zoo
models are among its cases (`--dtypes` picks element types), and a prepared bf16 model is a saved
executable whose contractions are bf16 mma.sync kernels."""

from __future__ import annotations

import os
import pickle

import torch


def test_bf16_kernels_and_zoo_cases_are_listed(load_benchmark):
    bench = load_benchmark("gpu")
    assert {"matmul_bf16_4096", "bmm_bf16_1024"} <= set(bench.KERNELS)
    _, shapes, dtype, work, unit = bench.kernel_case("matmul_bf16_4096")
    assert dtype == "bf16" and unit == "TFLOP/s" and bench.torch_dtype(dtype) is torch.bfloat16
    every = list(bench.model_cases({"zoo"}, None, [1]))
    assert {dtype for _, _, _, dtype, _ in every} == {"f32", "f16", "bf16"}
    only = list(bench.model_cases({"zoo"}, None, [1], ("bf16",)))
    assert only and {dtype for _, _, _, dtype, _ in only} == {"bf16"} and len(only) * 3 == len(every)
    # --opt-levels 0,2: each model case twice, level 0's named apart (the default level's name unchanged)
    levels = list(bench.model_cases({"vtc"}, ["vtc_llama3_decode"], [1], opt_levels=(0, 2)))
    assert [(case, level) for case, *_, level in levels] == [("vtc_llama3_decode_f32_b1_O0", 0),
                                                              ("vtc_llama3_decode_f32_b1", 2)]
    assert bench.TOLERANCE["f16"] < bench.TOLERANCE["bf16"] < 0.1


def test_prepared_bf16_model_runs_its_contractions_on_tensor_cores(load_benchmark, tmp_path):
    from vtmlir.backend.cuda import load

    bench = load_benchmark("gpu")
    bench.prepare(str(tmp_path), {"zoo", "kernels"}, ["mlp"], [8], "sm_90", ("bf16",))
    assert sorted(os.listdir(tmp_path)) == ["mlp_bf16_b8.case", "mlp_bf16_b8.vtcuda"]
    meta = pickle.loads((tmp_path / "mlp_bf16_b8.case").read_bytes())
    assert meta["dtype"] == "bf16" and meta["name"] == "mlp"
    exe = load(str(tmp_path / "mlp_bf16_b8.vtcuda"))
    contractions = [k for k in exe.kernels if k.schedule == "mma-sync"]
    assert len(contractions) == 3, [(k.name, k.schedule) for k in exe.kernels]
    assert all("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in k.ptx for k in contractions)
