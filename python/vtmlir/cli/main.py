"""`vtmlir` command: `demo` (the bundled main job), `models` (the zoo), `import` (a zoo model as MLIR)."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="vtmlir", description="vtmlir: an MLIR-based deep-learning compiler")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="compile and check a Llama decoder layer and a ResNet block (CPU + PTX)")
    demo.add_argument("--arch", action="append", help="PTX targets to assemble for (default: sm_80 and sm_90)")
    sub.add_parser("models", help="list the model zoo")
    imp = sub.add_parser("import", help="import a model-zoo model and print its MLIR")
    imp.add_argument("model", help="a name from `vtmlir models`")
    imp.add_argument("--output-type", default="linalg-on-tensors", choices=("linalg-on-tensors", "torch"))
    imp.add_argument("--batch", type=int, default=1)
    imp.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
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
        if args.command == "import":
            from vtmlir.frontend import import_torch
            from vtmlir.models import get

            model, inputs = get(args.model).build(batch=args.batch, seed=0)
            text = str(import_torch(model, *inputs, output_type=args.output_type))
            if args.output == "-":
                sys.stdout.write(text)
            else:
                with open(args.output, "w") as f:
                    f.write(text)
            return 0
    except VtmlirError as err:
        print(err, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
