"""`vtmlir` command: `vtmlir demo` (the bundled main job) and `vtmlir models` (the model zoo)."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="vtmlir", description="vtmlir: an MLIR-based deep-learning compiler")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="compile and check a Llama decoder layer and a ResNet block (CPU + PTX)")
    demo.add_argument("--arch", action="append", help="PTX targets to assemble for (default: sm_80 and sm_90)")
    sub.add_parser("models", help="list the model zoo")
    args = parser.parse_args(argv)

    from vtmlir.errors import VtmlirError

    try:
        if args.command == "demo":
            from vtmlir.demo import run_demo

            rows = run_demo(archs=tuple(args.arch or ("sm_80", "sm_90")))
            return 0 if all(r.ok for r in rows) else 1
        if args.command == "models":
            from vtmlir.models import ZOO

            for name, spec in ZOO.items():
                print(f"{name:28s} {spec.description}")
            return 0
    except VtmlirError as err:
        print(err, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
