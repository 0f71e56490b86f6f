"""`vt-fuzz`: the malformed-input fuzzer and the differential tester from the command line.

    vt-fuzz mlir  [--seed S] [--count N | --seconds T] [--start I] [--out DIR] [--mode fork|subprocess]
    vt-fuzz torch [--seed S] [--count N | --seconds T] [--start I] [--pipelines a,b] [--family F] [--out DIR]
    vt-fuzz mlir --seed S --case I [--minimize]      re-run (and shrink) one case

Progress and failures are JSON lines on stdout; the last line is the summary with the counts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vt-fuzz", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("mlir", "torch"):
        p = sub.add_parser(name)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--count", type=int)
        p.add_argument("--seconds", type=float)
        p.add_argument("--start", type=int, default=0, help="first case index")
        p.add_argument("--case", type=int, help="run only this case (with its printout)")
        p.add_argument("--out", type=Path, help="directory for reproducers of failures")
        p.add_argument("--timeout", type=float, default=60.0 if name == "mlir" else 300.0)
    mlir = sub.choices["mlir"]
    mlir.add_argument("--mode", choices=("fork", "subprocess"), default="fork")
    mlir.add_argument("--tools", default="vt-opt,vtmlir")
    mlir.add_argument("--minimize", action="store_true", help="with --case: shrink the input while it fails")
    torch = sub.choices["torch"]
    torch.add_argument("--pipelines", help="comma-separated pipeline names (default: all)")
    torch.add_argument("--family", help="program family (default: all, round robin)")
    return parser


def _emit(obj) -> None:
    print(json.dumps(obj), flush=True)


def _log(line: str) -> None:
    print(line, flush=True)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.count is None and args.seconds is None and args.case is None:
        args.count = 100
    if args.command == "mlir":
        return _mlir(args)
    return _torch(args)


def _mlir(args) -> int:
    from . import mlir_fuzz, mutate, runner

    tools = tuple(args.tools.split(","))
    if args.case is not None:
        runner.warm_up(tools)
        corpus = mutate.corpus_seeds()
        case = mlir_fuzz.make_case(args.seed, args.case, corpus, mlir_fuzz._pass_names(), tools)
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            outcome = mlir_fuzz.run_case(case, Path(tmp), args.timeout, args.mode)
            _emit({**case.describe(), "kind": outcome.kind, "signature": outcome.signature()})
            sys.stdout.write(outcome.stderr[-3000:] + "\n")
            if args.minimize and outcome.failed:
                sig = outcome.signature()

                def still_fails(data: bytes) -> bool:
                    trial = mlir_fuzz.Case(case.seed, case.index, case.source, case.mutations, case.tool,
                                           case.argv, data)
                    return mlir_fuzz.run_case(trial, Path(tmp), args.timeout, args.mode).signature() == sig

                small = mlir_fuzz.minimize(case.data, still_fails)
                out = args.out or Path(".")
                out.mkdir(parents=True, exist_ok=True)
                path = out / f"s{case.seed}-c{case.index}.min.mlir"
                path.write_bytes(small)
                _emit({"minimized": str(path), "bytes": len(small)})
        return 0
    stats = mlir_fuzz.fuzz(args.seed, args.count, args.seconds, start=args.start, timeout=args.timeout,
                           mode=args.mode, out=args.out, tools=tools, log=_log)
    _emit({"summary": stats.summary(), "seed": args.seed, "start": args.start})
    return 1 if stats.failures else 0


def _torch(args) -> int:
    from . import differential

    pipelines = args.pipelines.split(",") if args.pipelines else None
    if args.case is not None:
        differential.warm_up()
        result = differential.run_program(args.seed, args.case, pipelines, family=args.family,
                                          timeout=args.timeout, verbose=True)
        _emit(result)
        return 0
    stats = differential.fuzz(args.seed, args.count, args.seconds, start=args.start, pipelines=pipelines,
                              family=args.family, timeout=args.timeout, out=args.out, log=_log)
    _emit({"summary": stats.summary(), "seed": args.seed, "start": args.start})
    return 1 if stats.failures else 0


if __name__ == "__main__":
    sys.exit(main())
