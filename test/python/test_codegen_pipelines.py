"""passes/*.pipeline mirror the backends' pipelines, and vt-opt replays code generation with them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vtmlir.backend.write_pipelines import codegen_pipelines
from vtmlir.frontend import import_torch
from vtmlir.models import ZOO

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(codegen_pipelines()))
def test_pipeline_files_are_current(name):
    path = REPO / "passes" / name
    assert path.exists(), f"missing {path}: run python -m vtmlir.backend.write_pipelines"
    assert path.read_text() == codegen_pipelines()[name], \
        f"{path} is stale: run python -m vtmlir.backend.write_pipelines"


def _vt_opt(text: str, pipeline_file: str) -> str:
    pipeline = (REPO / "passes" / pipeline_file).read_text()
    proc = subprocess.run([sys.executable, "-m", "vtmlir.cli.vt_opt", "-", f"--pass-pipeline={pipeline}"],
                          input=text, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def kernel_level():
    model, inputs = ZOO["resnet_basic_block"].build(batch=1, seed=0)
    return _vt_opt(str(import_torch(model, *inputs)), "bufferize.pipeline")


def test_bufferize_replay_gives_memrefs_and_no_copies(kernel_level):
    assert "memref<" in kernel_level and "tensor<" not in kernel_level.split("{-#")[0]
    assert "memref.copy" not in kernel_level


def test_cpu_replay_reaches_the_llvm_dialect(kernel_level):
    llvm = _vt_opt(kernel_level, "cpu.pipeline")
    body = llvm.split("{-#")[0]
    assert "llvm.func @_mlir_ciface_main" in body
    assert not any(f" {d}." in body for d in ("scf", "memref", "linalg", "arith", "func"))


def test_cuda_replay_outlines_nvvm_kernels(kernel_level):
    nvvm = _vt_opt(kernel_level, "cuda.pipeline")
    assert nvvm.count("gpu.launch_func") == nvvm.count("gpu.module @") > 0
    assert "nvvm.read.ptx.sreg" in nvvm and "#nvvm.target<chip = \"sm_80\">" in nvvm
