"""Write the code-generation pipelines to the top-level `passes/` folder (or check they are current).

The backends define their pipelines in Python (`bufferize.GRAPH_TO_KERNELS`, `cpu.lower.CPU_STAGES`,
`cuda.lower.DEFAULT_STAGES`); `passes/*.pipeline` mirror them as plain text, one top-level element
per line, so a user can replay code generation stage by stage with
`vt-opt --pass-pipeline="$(cat passes/cpu.pipeline)"`. A test fails when they drift.

    python -m vtmlir.backend.write_pipelines            # rewrite passes/*.pipeline
    python -m vtmlir.backend.write_pipelines --check    # exit 1 if any is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .bufferize import GRAPH_TO_KERNELS
from .cpu.lower import CPU_STAGES
from .cuda.lower import DEFAULT_STAGES

DEFAULT_DIR = Path(__file__).resolve().parents[3] / "passes"


def _split_top_level(body: str) -> list[str]:
    """Top-level comma-separated elements of a pipeline body (commas inside () and {} kept)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i].strip())
            start = i + 1
    parts.append(body[start:].strip())
    return [p for p in parts if p]


def _body(pipeline: str) -> str:
    prefix = "builtin.module("
    assert pipeline.startswith(prefix) and pipeline.endswith(")"), pipeline
    return pipeline[len(prefix):-1]


def _format(elements: list[str]) -> str:
    return "builtin.module(\n  " + ",\n  ".join(elements) + "\n)\n"


def codegen_pipelines(chip: str = "sm_80") -> dict[str, str]:
    """File name → pipeline text for every code-generation pipeline."""
    cpu = [e for _, text in CPU_STAGES for e in _split_top_level(_body(text))]
    cuda = [e for stage in DEFAULT_STAGES for e in _split_top_level(_body(stage.text(chip)))]
    return {
        "bufferize.pipeline": _format(_split_top_level(_body(GRAPH_TO_KERNELS))),
        "cpu.pipeline": _format(cpu),
        "cuda.pipeline": _format(cuda),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if a file is stale")
    args = parser.parse_args(argv)
    stale = []
    for name, text in codegen_pipelines().items():
        path = args.dir / name
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(text)
    if args.check and stale:
        print("stale: " + ", ".join(map(str, stale)) + "\nrun: python -m vtmlir.backend.write_pipelines",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
