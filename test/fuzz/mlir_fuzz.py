"""The malformed-input fuzzer: mutated lit tests through `vt-opt` and `vtmlir compile`.

Case `i` of seed `s` is fully determined by `(s, i)`: the corpus chunk, the mutations, the tool and
its arguments (a random registered vtmlir pass with random options, sometimes followed by an
upstream pass; or `vtmlir compile` with a random graph pipeline, stage and target). Each case runs
in a child with a time limit (`runner.run_tool`) and is classified; failures (crash, traceback,
internal error, silent failure, hang) are written to `--out` as reproducers (the input bytes and a
JSON file with the arguments), and can be minimised (`minimize`) into `test/fuzz/corpus/`.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import mutate, runner

UPSTREAM_PASSES = ["--canonicalize", "--cse", "--linalg-generalize-named-ops", "--linalg-fuse-elementwise-ops",
                   "--one-shot-bufferize=bufferize-function-boundaries", "--convert-linalg-to-loops"]
COMPILE_PIPELINES = [None, None, "vt-eliminate-data-movement", "vt-stats, canonicalize",
                     "layout-resolve, layout-materialize", "layout-select-ilp, layout-hoist, layout-materialize",
                     "temco-decompose", "dvm-fuse", "vt-eliminate-data-movement, vt-lower-views"]


def _pass_names() -> list[str]:
    from vtmlir.passes.registry import _BUILTIN_PASSES

    return sorted(_BUILTIN_PASSES)


def _random_option_text(rng: random.Random, name: str) -> str:
    from vtmlir.passes.registry import get_pass

    options = get_pass(name).options
    if not options or rng.random() < 0.6:
        return ""
    opt = rng.choice(options)
    if opt.type is bool:
        value = rng.choice(["true", "false", "maybe"])
    elif opt.type is int:
        value = rng.choice(["0", "1", "-1", "3", "1000000", "x"])
    elif opt.type is float:
        value = rng.choice(["0", "0.5", "-1", "1e30", "nan", "x"])
    elif opt.type is str:
        # Never a path: report/output options only print to stderr or nowhere.
        value = rng.choice(["-", "none", "", "bogus"]) if opt.name in ("output", "report") else \
            rng.choice([repr(opt.default)[1:-1] if isinstance(opt.default, str) else "", "bogus", "", "-"])
    else:
        value = rng.choice(["1,2", "", "x", "0"])
    return f"{opt.name}={value}"


@dataclass
class Case:
    seed: int
    index: int
    source: str
    mutations: list
    tool: str
    argv: list  # "{input}" stands for the input file
    data: bytes

    def describe(self) -> dict:
        return {"seed": self.seed, "case": self.index, "source": self.source, "mutations": self.mutations,
                "tool": self.tool, "argv": self.argv}


def make_case(seed: int, index: int, corpus, passes: list[str], tools=("vt-opt", "vtmlir")) -> Case:
    rng = random.Random(f"mlir-fuzz:{seed}:{index}")
    source, text = rng.choice(corpus)
    # A quarter of the cases keep the test as it is: valid IR through unusual chains of passes.
    data, names = (text, []) if rng.random() < 0.25 else mutate.mutate(rng, text, corpus)
    tool = rng.choice(tools) if rng.random() < 0.35 else tools[0]
    if tool == "vt-opt":
        argv = ["{input}"]
        for _ in range(rng.choice([1, 1, 2, 3])):
            name = rng.choice(passes)
            opts = _random_option_text(rng, name)
            argv.append(f"--{name}" + (f"={opts}" if opts else ""))
        if rng.random() < 0.2:
            argv.append(rng.choice(UPSTREAM_PASSES))
        if rng.random() < 0.1:
            argv.append("--split-input-file")
    else:
        argv = ["compile", "{input}"]
        pipeline = rng.choice(COMPILE_PIPELINES)
        if pipeline:
            argv += ["--pipeline", pipeline]
        if rng.random() < 0.2:
            argv += ["--target", "cuda"]
        if rng.random() < 0.2:
            argv += ["--emit", rng.choice(["graph", "stages", "kernels", "host", "bogus"])]
    return Case(seed, index, source, names, tool, argv, data)


def run_case(case: Case, work: Path, timeout: float, mode: str) -> runner.Outcome:
    path = work / "input.mlir"
    path.write_bytes(case.data)
    argv = [str(path) if a == "{input}" else a for a in case.argv]
    return runner.run_tool(case.tool, argv, timeout=timeout, mode=mode)


@dataclass
class Stats:
    per_tool: dict = field(default_factory=dict)  # tool -> Counter of kinds
    unlocated: Counter = field(default_factory=Counter)  # tool -> clean errors without file:line:col
    failures: list = field(default_factory=list)  # (case description, outcome signature)
    signatures: Counter = field(default_factory=Counter)
    error_kinds: Counter = field(default_factory=Counter)  # clean errors by signature
    unlocated_kinds: Counter = field(default_factory=Counter)
    cases: int = 0
    seconds: float = 0.0

    def add(self, case: Case, outcome: runner.Outcome) -> None:
        self.cases += 1
        self.per_tool.setdefault(case.tool, Counter())[outcome.kind] += 1
        if outcome.kind == "error":
            self.error_kinds[f"{case.tool}: {outcome.signature()}"] += 1
            if not outcome.located:
                self.unlocated[case.tool] += 1
                self.unlocated_kinds[f"{case.tool}: {outcome.signature()}"] += 1
        if outcome.failed:
            sig = outcome.signature()
            self.signatures[sig] += 1
            self.failures.append((case.describe(), sig))

    def summary(self) -> dict:
        return {"cases": self.cases, "seconds": round(self.seconds, 1),
                "per_tool": {t: dict(c) for t, c in self.per_tool.items()},
                "errors_without_location": dict(self.unlocated),
                "unlocated_signatures": dict(self.unlocated_kinds.most_common(25)),
                "error_signatures": dict(self.error_kinds.most_common(40)),
                "failure_signatures": dict(self.signatures.most_common())}


def fuzz(seed: int, count: int | None = None, seconds: float | None = None, *, start: int = 0,
         timeout: float = 60.0, mode: str = "fork", out: Path | None = None, tools=("vt-opt", "vtmlir"),
         log=None) -> Stats:
    """Run cases start, start+1, ... of `seed` until `count` cases or `seconds` have passed."""
    import tempfile

    corpus = mutate.corpus_seeds()
    passes = _pass_names()
    runner.warm_up(tools)
    stats = Stats()
    began = time.monotonic()
    index = start
    with tempfile.TemporaryDirectory(prefix="vtfuzz-work-") as tmp:
        work = Path(tmp)
        while (count is None or stats.cases < count) and (seconds is None or time.monotonic() - began < seconds):
            case = make_case(seed, index, corpus, passes, tools)
            outcome = run_case(case, work, timeout, mode)
            stats.add(case, outcome)
            if outcome.failed:
                if out is not None:
                    save_reproducer(out, case, outcome)
                if log:
                    log(json.dumps({"failure": case.describe(), "signature": outcome.signature()}))
            index += 1
            if log and stats.cases % 500 == 0:
                log(json.dumps({"progress": stats.cases, "failures": len(stats.failures),
                                "seconds": round(time.monotonic() - began)}))
    stats.seconds = time.monotonic() - began
    return stats


def save_reproducer(out: Path, case: Case, outcome: runner.Outcome) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"s{case.seed}-c{case.index}-{outcome.kind}"
    stem.with_suffix(".input").write_bytes(case.data)
    meta = {**case.describe(), "kind": outcome.kind, "signature": outcome.signature(),
            "stderr": outcome.stderr[-4000:]}
    stem.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    return stem


def minimize(data: bytes, still_fails, budget: float = 120.0) -> bytes:
    """Delta debugging (ddmin) over lines, then over bytes of what is left, while `still_fails`."""
    deadline = time.monotonic() + budget

    def reduce(units: list[bytes], joiner: bytes) -> list[bytes]:
        n = 2
        while len(units) >= 2 and time.monotonic() < deadline:
            size = max(1, len(units) // n)
            reduced = False
            for i in range(0, len(units), size):
                candidate = units[:i] + units[i + size :]
                if candidate and still_fails(joiner.join(candidate)):
                    units, n, reduced = candidate, max(n - 1, 2), True
                    break
            if not reduced:
                if n >= len(units):
                    break
                n = min(len(units), n * 2)
        return units

    lines = reduce(data.split(b"\n"), b"\n")
    data = b"\n".join(lines)
    if len(data) <= 2000:
        data = b"".join(reduce([data[i : i + 1] for i in range(len(data))], b""))
    return data
