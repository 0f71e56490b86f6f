"""`vtmlir` command.

    vtmlir demo                      the bundled main job (CPU numerics + PTX of two real blocks)
    vtmlir models                    the model zoo
    vtmlir import MODEL              a zoo model as MLIR (linalg-on-tensors or torch level)
    vtmlir compile INPUT --emit X    compile a .mlir file (or stdin, or a zoo model) and print the IR
                                     after stage X, the PTX of every kernel, or the host program
"""

from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
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
    comp = sub.add_parser("compile", help="compile .mlir (or a zoo model) and print a stage, PTX or the host program")
    comp.add_argument("input", help="a .mlir file at linalg-on-tensors level, '-' for stdin, or a zoo model name")
    comp.add_argument("--target", default="cpu", choices=("cpu", "cuda"))
    comp.add_argument("--chip", default="sm_80", help="CUDA chip the PTX targets (default: sm_80)")
    comp.add_argument("--pipeline", help="graph-level pipeline to run first (vtmlir and upstream passes)")
    comp.add_argument("--emit", help="a stage name, 'ptx' or 'host' (cuda), or 'stages' to list them "
                                     "(default: llvm for cpu, ptx for cuda)")
    comp.add_argument("--report", action="store_true",
                      help="print the kernel report (schedules; for cuda also ptxas resources, occupancy and "
                           "an H100 roofline estimate) instead of a stage")
    comp.add_argument("--dtype", choices=("float32", "float16", "bfloat16"),
                      help="a zoo model's parameters and floating-point inputs in this type (model.half() etc.)")
    comp.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from vtmlir.errors import VtmlirError

    try:
        return _COMMANDS[args.command](args)
    except VtmlirError as err:
        print(err, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _demo(args) -> int:
    from vtmlir.demo import run_demo

    rows = run_demo(archs=tuple(args.arch or ("sm_80", "sm_90")))
    return 0 if all(r.ok for r in rows) else 1


def _models(args) -> int:
    from vtmlir.models import REGISTRIES

    for title, registry in REGISTRIES.items():
        print(f"# {title}")
        for name, spec in registry.items():
            print(f"{name:28s} {spec.description}")
    return 0


def _import(args) -> int:
    from vtmlir.frontend import import_torch
    from vtmlir.models import get

    model, inputs = get(args.model).build(batch=args.batch, seed=0)
    _write(args.output, str(import_torch(model, *inputs, output_type=args.output_type)))
    return 0


def _compile(args) -> int:
    import vtmlir
    from vtmlir.errors import VtmlirError
    from vtmlir.models import REGISTRIES, get

    options = dict(target=args.target, pipeline=args.pipeline, chip=args.chip)
    if any(args.input in registry for registry in REGISTRIES.values()):
        model, inputs = get(args.input).build(batch=1, seed=0)
        if args.dtype:
            import torch

            dtype = getattr(torch, args.dtype)
            model = model.to(dtype)
            inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
        compiled = vtmlir.compile(model, *inputs, **options)
    else:
        source = sys.stdin.read() if args.input == "-" else args.input
        if args.input != "-" and not args.input.endswith(".mlir"):
            import os

            if args.dtype:
                raise VtmlirError("error: --dtype applies to zoo models; an .mlir file has its types")
            if not os.path.isfile(args.input):
                raise VtmlirError(f"error: '{args.input}' is neither a file nor a zoo model (see `vtmlir models`)")
        compiled = vtmlir.compile(source, **options)

    emit = args.emit or ("ptx" if args.target == "cuda" else "llvm")
    if args.report:
        text = str(compiled.report()) + "\n"
    elif emit == "stages":
        text = "\n".join(compiled.stages) + "\n"
    elif emit == "ptx" and args.target == "cuda":
        text = "".join(f"// kernel {k.name}: grid {k.grid}, block {k.block}\n{k.ptx}\n" for k in compiled.kernels)
    elif emit == "host" and args.target == "cuda":
        text = str(compiled.host_program) + "\n"
    elif emit in compiled.stages:
        text = compiled.stages[emit]
    else:
        extra = ", ptx, host" if args.target == "cuda" else ""
        raise VtmlirError(f"error: nothing to emit called '{emit}'; choose one of: stages, "
                          f"{', '.join(compiled.stages)}{extra}")
    _write(args.output, text)
    return 0


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)


_COMMANDS = {"demo": _demo, "models": _models, "import": _import, "compile": _compile}


if __name__ == "__main__":
    sys.exit(main())
