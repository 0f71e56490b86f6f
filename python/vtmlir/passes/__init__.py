"""vtmlir passes: a registry of Python passes that mix with upstream MLIR passes in one pipeline.

- `run_pipeline(module, "builtin.module(vt-stats, func.func(canonicalize), cse)")` runs a pipeline and
  returns its passes' results (`PipelineResults`: `.report("vt-stats")`).
- `parse_pipeline(text)` parses (and validates) one.
- `get_pass(name)`, `all_passes()`, `register_pass`, `Pass`, `Option`: the registry (see `registry`).
- `vtmlir.passes.vt_stats.collect_stats(module)`: the data-movement measure as a Python API.
"""

from .pipeline import Pipeline, PipelineResults, parse_pipeline, run_pipeline
from .registry import Option, Pass, PassFailure, all_passes, get_pass, register_pass

__all__ = [
    "Option",
    "Pass",
    "PassFailure",
    "Pipeline",
    "PipelineResults",
    "all_passes",
    "get_pass",
    "parse_pipeline",
    "register_pass",
    "run_pipeline",
]
