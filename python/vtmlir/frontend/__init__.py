"""Frontends: PyTorch modules through torch-mlir, and `.mlir` text or files."""

from .source import as_module, parse_mlir
from .torch_import import import_torch

__all__ = ["as_module", "import_torch", "parse_mlir"]
