"""`vtmlir` command.

    vtmlir demo                      the bundled main job (CPU numerics + PTX of two real blocks)
    vtmlir models                    the model zoo
    vtmlir import MODEL              a zoo model as MLIR (linalg-on-tensors or torch level)
    vtmlir compile INPUT --emit X    compile a .mlir file (or stdin, or a zoo model) and print the IR
                                     after stage X, the PTX of every kernel, or the host program
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

import vtmlir
from vtmlir.errors import VtmlirError
from vtmlir.frontend import import_torch
from vtmlir.frontend.source import decode_source


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
    comp.add_argument("--allow-tf32", action="store_true",
                      help="cuda: f32 matmuls on TF32 tensor cores (as torch.backends.cuda.matmul.allow_tf32; "
                           "default: exact f32)")
    comp.add_argument("--pipeline", help="graph-level pipeline to run instead of the opt-level one (vtmlir and "
                                         "upstream passes)")
    comp.add_argument("-O", "--opt-level", dest="opt_level", type=int, default=2, choices=(0, 1, 2),
                      help="vtmlir's optimisation level: 0 none, 1 bitwise-identical steps, 2 (default) "
                           "everything that wins on the target (docs/pipeline.md)")
    comp.add_argument("--memory-budget", type=int, help="bytes: run TeMCO's rematerialisation and fusion")
    comp.add_argument("--llvm-opt-level", type=int, default=2, choices=(0, 1, 2, 3),
                      help="LLVM optimisation level of the CPU JIT (default: 2)")
    comp.add_argument("--report", action="store_true",
                      help="print to stderr what each optimisation step did and the kernel report (schedules; "
                           "for cuda also ptxas resources, occupancy and an H100 roofline estimate)")
    comp.add_argument("--emit", help="a stage name, 'ptx' or 'host' (cuda), or 'stages' to list them "
                                     "(default: llvm for cpu, ptx for cuda)")
    comp.add_argument("--dtype", choices=("float32", "float16", "bfloat16"),
                      help="a zoo model's parameters and floating-point inputs in this type (model.half() etc.)")
    comp.add_argument("--threads", type=int, help="cpu: threads the kernels run on (default: all cores)")
    comp.add_argument("--profile", type=int, metavar="N",
                      help="cpu: a profiling build, run N times (a zoo model on its example inputs, an .mlir "
                           "function on seeded random ones); print each kernel's median time to stderr")
    comp.add_argument("--profile-clock", choices=("wall", "cpu"), default="wall",
                      help="what --profile measures: wall time (default) or the thread's CPU time (a busy machine)")
    comp.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)

    try:
        return _COMMANDS[args.command](args)
    except VtmlirError as err:
        print(err, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # noqa: BLE001 - the one place every failure ends up: never a traceback
        if os.environ.get("VTMLIR_DEBUG"):
            traceback.print_exc()
        summary = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"vtmlir: internal error: {type(exc).__name__}: {summary} -- this is a bug in vtmlir; "
              "rerun with VTMLIR_DEBUG=1 for the Python traceback", file=sys.stderr)
        return 2


def _demo(args) -> int:
    # deferred: the demo loads the CUDA backend and rich; `vtmlir --help` and the other commands do not
    from vtmlir.demo import run_demo

    rows = run_demo(archs=tuple(args.arch or ("sm_80", "sm_90")))
    return 0 if all(r.ok for r in rows) else 1


def _models(args) -> int:
    from vtmlir.models import REGISTRIES  # deferred: models imports torch (heavy)

    for title, registry in REGISTRIES.items():
        print(f"# {title}")
        for name, spec in registry.items():
            print(f"{name:28s} {spec.description}")
    return 0


def _import(args) -> int:
    from vtmlir.models import get  # deferred: models imports torch (heavy)

    model, inputs = get(args.model).build(batch=args.batch, seed=0)
    _write(args.output, str(import_torch(model, *inputs, output_type=args.output_type)))
    return 0


def _is_zoo_model(name: str) -> bool:
    """Whether `name` names a zoo model. An .mlir file, stdin or an existing file is not looked up:
    the registries import torch, 2-3 s that compiling a file never needs."""
    if name == "-" or name.endswith(".mlir") or os.path.isfile(name):
        return False
    from vtmlir.models import REGISTRIES  # deferred: models imports torch (heavy)

    return any(name in registry for registry in REGISTRIES.values())


def _compile(args) -> int:
    options = dict(target=args.target, pipeline=args.pipeline, chip=args.chip, opt_level=args.opt_level,
                   memory_budget=args.memory_budget, llvm_opt_level=args.llvm_opt_level, report=args.report,
                   allow_tf32=args.allow_tf32, threads=args.threads)
    if args.profile is not None:
        if args.profile < 1:
            raise VtmlirError(f"error: --profile takes a positive number of calls, got {args.profile}")
        options["profile"] = True
    inputs = None
    if _is_zoo_model(args.input):
        from vtmlir.models import get  # deferred: models imports torch (heavy)

        model, inputs = get(args.input).build(batch=1, seed=0)
        if args.dtype:
            import torch  # deferred: torch is heavy; loaded on first use

            dtype = getattr(torch, args.dtype)
            model = model.to(dtype)
            inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
        compiled = vtmlir.compile(model, *inputs, **options)
    else:
        if args.input == "-":
            source = decode_source(sys.stdin.buffer.read(), "<stdin>")
        else:
            source = args.input
        if args.input != "-" and not args.input.endswith(".mlir"):
            if args.dtype:
                raise VtmlirError("error: --dtype applies to zoo models; an .mlir file has its types")
            if not os.path.isfile(args.input):
                raise VtmlirError(f"error: '{args.input}' is neither a file nor a zoo model (see `vtmlir models`)")
        compiled = vtmlir.compile(source, **options)

    if args.report:
        sys.stderr.write(f"{compiled.report()}\n")
    if args.profile is not None:
        from vtmlir.backend.cpu.profile import sample_inputs  # deferred: loads the CPU backend

        if inputs is None:
            inputs = sample_inputs(compiled.signature)
        sys.stderr.write(f"{compiled.profile(*inputs, repeat=args.profile, clock=args.profile_clock)}\n")
    emit = args.emit or ("ptx" if args.target == "cuda" else "llvm")
    if emit == "stages":
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
