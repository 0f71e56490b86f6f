"""Shared fixtures: deterministic torch, small helpers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def load_benchmark():
    """`load_benchmark("gpu")`: benchmarks/gpu.py as a fresh module (the scripts import their
    neighbour jsonl.py, so benchmarks/ is on the path while it loads)."""
    def load(name: str):
        sys.path.insert(0, str(BENCHMARKS))
        try:
            spec = importlib.util.spec_from_file_location(f"{name}_benchmark", BENCHMARKS / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(BENCHMARKS))
        return module
    return load
