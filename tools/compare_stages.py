#!/usr/bin/env python3
"""Compile every zoo model and dump each `.stages` stage, or compare two such dumps.

Refactorings that must not change the generated IR (issue 20) are checked with it:

    PYTHONPATH=<before>/python python3 tools/compare_stages.py dump /tmp/before
    PYTHONPATH=<after>/python  python3 tools/compare_stages.py dump /tmp/after
    python3 tools/compare_stages.py compare /tmp/before /tmp/after

`dump` writes `<dir>/<model>/<index>-<stage>.mlir` (one file per stage, in pipeline order) for every
model of `vtmlir.models.ZOO` (`--models a,b` for a subset; `--pipeline` adds a graph-level pipeline,
`--target cuda` the GPU stages). `compare` lists the stages that differ or exist on one side only
and exits 1 if there is any.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path


def dump(out: Path, models: list[str] | None, target: str, pipeline: str | None) -> int:
    import torch

    import vtmlir
    from vtmlir import models as zoo

    failed = 0
    for name in models or list(zoo.ZOO):
        model, inputs = zoo.get(name).build(batch=1, seed=0)
        directory = out / name
        directory.mkdir(parents=True, exist_ok=True)
        try:
            with torch.no_grad():
                compiled = vtmlir.compile(model, *inputs, target=target, pipeline=pipeline)
        except vtmlir.VtmlirError as e:  # recorded, so that both sides must fail alike
            (directory / "error.txt").write_text(f"{e}\n")
            print(f"{name}: error: {e}", file=sys.stderr)
            failed += 1
            continue
        for index, (stage, text) in enumerate(compiled.stages.items()):
            (directory / f"{index:02d}-{stage}.mlir").write_text(text)
        print(f"{name}: {len(compiled.stages)} stages")
    return 0 if not failed else 2


def compare(before: Path, after: Path) -> int:
    names_before = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    names_after = {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    differences = 0
    for rel in sorted(names_before ^ names_after):
        side = "before" if rel in names_before else "after"
        print(f"only {side}: {rel}")
        differences += 1
    for rel in sorted(names_before & names_after):
        a, b = (before / rel).read_text(), (after / rel).read_text()
        if a != b:
            differences += 1
            diff = difflib.unified_diff(a.splitlines(), b.splitlines(), f"before/{rel}", f"after/{rel}",
                                        lineterm="", n=1)
            print("\n".join(list(diff)[:40]))
    print(f"{len(names_before & names_after)} stages compared, {differences} differ")
    return 1 if differences else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="compile the zoo and write every stage")
    d.add_argument("out", type=Path)
    d.add_argument("--models", help="comma-separated zoo names (default: all of vtmlir.models.ZOO)")
    d.add_argument("--target", default="cpu")
    d.add_argument("--pipeline", default=None)
    c = sub.add_parser("compare", help="compare two dumps")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "dump":
        return dump(args.out, args.models.split(",") if args.models else None, args.target, args.pipeline)
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
