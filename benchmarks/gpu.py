"""GPU kernels and models on a real NVIDIA GPU (issue 22 point 5): vtmlir's CUDA executables against
torch CUDA eager (cuBLAS/cuDNN for contractions), torch.compile (inductor) and, for the matmuls,
cuBLAS through torch.mm. Prints JSON lines (benchmarks/README.md).

Compiling needs the compiler's own dependencies (torch-mlir, llvmlite, the nvcc wheel); running needs
a GPU. Where one machine has both, one command does everything; otherwise compile on the build machine
and run the saved executables (`CudaExecutable.save` / `vtmlir.backend.cuda.load`) on the GPU machine:

    python benchmarks/gpu.py                                  # compile and run here
    python benchmarks/gpu.py --prepare DIR [--chip sm_90]     # compile, save to DIR (no GPU needed)
    python benchmarks/gpu.py --run DIR [--deadline 420]       # run what DIR holds (GPU machine)
    options: [--only kernels,zoo,vtc,temco] [--models a,b] [--batches 1,8] [--repeat 20] [--no-torch-compile]

Per case:
- `max_abs_err` / `max_rel_err`: vtmlir's result (`compiled(*cuda tensors)`, the whole call path)
  against torch eager on the GPU with the same weights and inputs, and `ok` within the tolerance of
  the case's dtype (f32 1e-3 relative to the output's largest magnitude, f16 2e-2);
- `device_time` of vtmlir (`compiled.profile`: CUDA events around the launch sequence, inputs resident:
  no host copies timed), torch eager and torch.compile (CUDA events around the call), in µs, and
  `time_ratio` vtmlir / contender (below 1: vtmlir is faster);
- kernels: TFLOP/s (matmul) or GB/s of bytes read + written (softmax, LayerNorm, RMSNorm), with the
  fraction of the H100/H200 datasheet peak; models: kernel count and per schedule kind, and the three
  slowest kernels with their schedule;
- `call_time`: wall time of `compiled(*tensors)` with torch CUDA tensors in and out (host copies
  included: the runtime moves data through numpy) — what a user's call costs today.
torch.compile is skipped (a line with value null and the reason) once `--deadline` seconds are half
spent: on a lent machine the budget is minutes.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

from jsonl import Fn, Reporter

SUITE = "gpu"
emit = Reporter(SUITE).emit
TOLERANCE = {"f32": 1e-3, "f16": 2e-2}
#: Datasheet peaks (dense): H100 SXM / H200 have the same SMs and clocks, H200 more bandwidth.
PEAKS = {"H100": {"f16_tflops": 989.0, "f32_tflops": 67.0, "hbm_gbs": 3350.0},
         "H200": {"f16_tflops": 989.0, "f32_tflops": 67.0, "hbm_gbs": 4800.0}}


def kernel_case(name: str):
    """(module, input shapes, dtype, work, unit) of a kernel case, by name (rebuilt on the GPU machine)."""
    kind, dtype, size = name.split("_")
    n = int(size)
    if kind == "matmul":
        return Fn(torch.matmul), [(n, n), (n, n)], dtype, 2 * n ** 3, "TFLOP/s"
    if kind == "bmm":   # attention-shaped batch matmul: 32 heads of [n, 64] x [64, n]
        return Fn(torch.bmm), [(32, n, 64), (32, 64, n)], dtype, 2 * 32 * n * n * 64, "TFLOP/s"
    itemsize = 2 if dtype == "f16" else 4
    module = {"softmax": lambda: torch.nn.Softmax(-1), "layernorm": lambda: torch.nn.LayerNorm(n),
              "rmsnorm": lambda: torch.nn.RMSNorm(n, eps=1e-6)}[kind]()
    return module.eval(), [(n, n)], dtype, 2 * itemsize * n * n, "GB/s"


KERNELS = ["matmul_f16_4096", "matmul_f16_2048", "matmul_f32_2048", "bmm_f16_1024",
           "softmax_f32_4096", "layernorm_f32_4096", "rmsnorm_f32_4096", "softmax_f16_4096"]


def torch_dtype(dtype: str):
    return {"f32": torch.float32, "f16": torch.float16}[dtype]


def cast(tensors, dtype: str):
    return tuple(t.to(torch_dtype(dtype)) if t.is_floating_point() else t for t in tensors)


# -- prepare (any machine with the compiler) ---------------------------------------------------------

def model_cases(groups: set[str], names: list[str] | None, batches: list[int]):
    """(case, model name, batch, dtype) of the model benchmarks."""
    from vtmlir import models

    chosen = []
    if "zoo" in groups:
        chosen += [(n, d) for n in models.ZOO for d in ("f32", "f16")]
    if "vtc" in groups:
        chosen += [(n, "f32") for n in models.VTC_ZOO]
    if "temco" in groups:
        chosen += [(n, "f32") for n in ("temco_resnet18", "temco_vgg11", "temco_unet_small", "temco_densenet_small")]
    for name, dtype in chosen:
        if names and name not in names:
            continue
        for batch in batches:
            yield f"{name}_{dtype}_b{batch}", name, batch, dtype


def fingerprint(model) -> dict:
    """Per weight: shape, sum and sum of magnitudes (float64): equal models give equal fingerprints."""
    return {k: (tuple(v.shape), float(v.double().sum()), float(v.double().abs().sum()))
            for k, v in model.state_dict().items() if v.is_floating_point()}


def same_weights(model, saved: dict) -> bool:
    mine = fingerprint(model)
    return mine.keys() == saved.keys() and all(
        mine[k][0] == saved[k][0] and all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(mine[k][1:], saved[k][1:]))
        for k in saved)


def prepare(directory: str, groups: set[str], names, batches, chip: str) -> None:
    import vtmlir

    os.makedirs(directory, exist_ok=True)
    jobs = []
    if "kernels" in groups:
        for name in KERNELS:
            if not names or name in names:
                module, shapes, dtype, _, _ = kernel_case(name)
                gen = torch.Generator().manual_seed(0)
                inputs = tuple(torch.randn(*s, generator=gen) for s in shapes)
                jobs.append((name, {"kind": "kernel", "name": name, "dtype": dtype}, module, cast(inputs, dtype)))
    for case, name, batch, dtype in model_cases(groups, names, batches):
        from vtmlir import models

        model, inputs = models.get(name).build(batch=batch, seed=0)
        model = model.eval().to(torch_dtype(dtype))
        inputs = cast(inputs, dtype)
        # Neither inputs nor weights are saved (KV caches are tens of MB, weights as many, and a lent
        # machine takes 64 MiB): the GPU machine builds the model again from the same seed and checks
        # the weights against this fingerprint (torch's CPU generator gives the same numbers across
        # versions; a mismatch is reported, and the numerics line says so).
        jobs.append((case, {"kind": "model", "name": name, "batch": batch, "dtype": dtype,
                            "fingerprint": fingerprint(model)}, model, inputs))
    for case, meta, module, inputs in jobs:
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            exe = vtmlir.compile(module, *inputs, target="cuda", chip=chip)
            exe.assemble(chip)
            exe.report()   # cached in the executable: ptxas -v needs the nvcc wheel, absent on the GPU machine
        except Exception as err:  # noqa: BLE001 - a benchmark records a failure and goes on
            emit(case, "compile_time", None, "s", reason=f"{type(err).__name__}: {str(err)[:300]}")
            continue
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        exe.stages = {}   # the IR of every stage: not needed to run, and the transfer is small
        # The module's pytree call spec is torch's own object, which another torch version (the GPU
        # machine's) may not unpickle; these cases take and return plain tensors, the flat convention.
        exe.call_spec = None
        exe.save(os.path.join(directory, f"{case}.vtcuda"))
        meta.update(compile_wall_s=wall, compile_cpu_s=cpu)
        with open(os.path.join(directory, f"{case}.case"), "wb") as f:
            pickle.dump(meta, f)
        emit(case, "compile_time", round(cpu, 2), "s", clock="cpu", wall=round(wall, 2), kernels=len(exe.kernels))


# -- run (GPU machine) --------------------------------------------------------------------------------

def cuda_time(fn, repeat: int) -> float:
    """Median seconds of `fn()` on the GPU (CUDA events), after one warm-up call."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def errors(got, want) -> tuple[float, float]:
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    worst_abs = worst_rel = 0.0
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor) and w.is_floating_point():
            g = g.to(w.device).float()
            w = w.float()
            diff = (g - w).abs().max().item()
            worst_abs = max(worst_abs, diff)
            worst_rel = max(worst_rel, diff / max(w.abs().max().item(), 1e-12))
    return worst_abs, worst_rel


def device_peaks() -> tuple[str, dict]:
    name = torch.cuda.get_device_name(0)
    key = "H200" if "H200" in name else "H100"
    return name, PEAKS[key]


def run_case(case: str, meta: dict, exe, repeat: int, with_compile: bool, peaks: dict) -> None:
    from vtmlir import models

    dtype = meta["dtype"]
    if meta["kind"] == "kernel":
        module, shapes, _, work, unit = kernel_case(meta["name"])
        gen = torch.Generator(device="cuda").manual_seed(0)
        inputs = tuple(torch.randn(*s, generator=gen, device="cuda").to(torch_dtype(dtype)) for s in shapes)
        module = module.to("cuda").to(torch_dtype(dtype))
    else:
        module, inputs = models.get(meta["name"]).build(batch=meta["batch"], seed=0)
        module = module.eval().to(torch_dtype(dtype))
        weights_match = same_weights(module, meta["fingerprint"])
        module = module.to("cuda")
        inputs = tuple(t.to("cuda") for t in cast(inputs, dtype))
        work, unit = None, None
    if meta["kind"] == "kernel":
        weights_match = True
    with torch.no_grad():
        want = module(*[t.clone() for t in inputs])
        got = exe(*[t.clone() for t in inputs])
        abs_err, rel_err = errors(got, want)
        emit(case, "max_abs_err", abs_err, "", baseline="eager", max_rel_err=rel_err,
             ok=bool(rel_err <= TOLERANCE[dtype]) if weights_match else None, tolerance=TOLERANCE[dtype],
             **({} if weights_match else {"reason": "the rebuilt model's weights differ from the compiled ones"}))
        profile = exe.profile(*inputs, repeat=repeat)
        ours = profile["total_s"]
        contenders = {"eager": cuda_time(lambda: module(*inputs), repeat)}
        if with_compile:
            try:
                compiled = torch.compile(module)
                w0 = time.perf_counter()
                compiled(*inputs)
                torch.cuda.synchronize()
                emit(case, "compile_time", round(time.perf_counter() - w0, 2), "s", contender="inductor", clock="wall")
                contenders["inductor"] = cuda_time(lambda: compiled(*inputs), repeat)
            except Exception as err:  # noqa: BLE001 - inductor failing is a result, not a crash
                emit(case, "device_time", None, "us", contender="inductor", reason=f"{type(err).__name__}: {str(err)[:200]}")
        else:
            emit(case, "device_time", None, "us", contender="inductor", reason="skipped: time budget")
        w0 = time.perf_counter()
        calls = 0
        while calls < 3 or time.perf_counter() - w0 < 0.2:
            exe(*inputs)
            calls += 1
        call = (time.perf_counter() - w0) / calls
        # The buffers stay on the device between calls: after all those runs, the same inputs must
        # still give the same result, bit for bit.
        again = exe(*[t.clone() for t in inputs])
        pairs = zip(again if isinstance(again, tuple) else (again,), got if isinstance(got, tuple) else (got,))
        emit(case, "repeatable", all(torch.equal(a.cpu(), b.cpu()) for a, b in pairs), "")
    emit(case, "device_time", round(ours * 1e6, 2), "us", contender="vtmlir", kernels=len(exe.kernels),
         schedules=summary(exe), call_time_us=round(call * 1e6, 1))
    for name, seconds in contenders.items():
        emit(case, "device_time", round(seconds * 1e6, 2), "us", contender=name)
        emit(case, "time_ratio", round(ours / seconds, 3), "", baseline=name)
    if work is not None:
        scale = 1e12 if unit == "TFLOP/s" else 1e9
        peak = (peaks["f16_tflops"] if dtype == "f16" else peaks["f32_tflops"]) if unit == "TFLOP/s" else peaks["hbm_gbs"]
        for name, seconds in [("vtmlir", ours)] + list(contenders.items()):
            rate = work / seconds / scale
            emit(case, "throughput", round(rate, 2), unit, contender=name, fraction_of_peak=round(rate / peak, 3))
    slowest = sorted(zip(exe.kernels, (t for _, t in profile["kernels"])), key=lambda kt: -kt[1])[:3]
    emit(case, "slowest_kernels", [{"kernel": k.name, "schedule": k.schedule, "us": round(t * 1e6, 2),
                                    "h100_estimate_us": round(row.h100_estimate_s * 1e6, 2) if row else None}
                                   for (k, t), row in ((kt, report_row(exe, kt[0].name)) for kt in slowest)], "")


def summary(exe) -> dict:
    counts: dict[str, int] = {}
    for k in exe.kernels:
        counts[k.schedule] = counts.get(k.schedule, 0) + 1
    return counts


def report_row(exe, name: str):
    report = getattr(exe, "_report", None)
    for row in getattr(report, "kernels", ()):
        if row.name == name:
            return row
    return None


def run(directory: str, repeat: int, with_compile: bool, deadline: float) -> None:
    from vtmlir.backend.cuda import load

    start = time.perf_counter()
    name, peaks = device_peaks()
    emit("device", "name", name, "", torch=torch.__version__, peaks=peaks)
    cases = sorted(f[:-5] for f in os.listdir(directory) if f.endswith(".case"))
    def order(case: str) -> tuple:
        """Kernels (in `KERNELS` order), then the zoo, VTC and TeMCO models: torch.compile, skipped
        once half the deadline is spent, reaches the first ones."""
        meta = metas[case]
        if meta["kind"] == "kernel":
            return (0, KERNELS.index(case) if case in KERNELS else len(KERNELS), case)
        group = 3 if meta["name"].startswith("temco_") else 2 if meta["name"].startswith("vtc_") else 1
        return (group, meta["batch"], case)

    metas = {}
    for case in cases:
        with open(os.path.join(directory, f"{case}.case"), "rb") as f:
            metas[case] = pickle.load(f)
    for case in sorted(cases, key=order):
        elapsed = time.perf_counter() - start
        if elapsed > deadline:
            emit(case, "device_time", None, "us", contender="vtmlir", reason="skipped: deadline")
            continue
        try:
            exe = load(os.path.join(directory, f"{case}.vtcuda"))
            run_case(case, metas[case], exe, repeat, with_compile and elapsed < deadline / 2, peaks)
        except Exception as err:  # noqa: BLE001 - one failing case is a result; the others still run
            emit(case, "device_time", None, "us", contender="vtmlir", reason=f"{type(err).__name__}: {str(err)[:400]}")
        finally:
            runtime = getattr(exe, "_runtime", None) if "exe" in locals() else None
            if runtime is not None:
                runtime.close()
                exe._runtime = None
        sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare", metavar="DIR", help="compile and save the executables to DIR")
    parser.add_argument("--run", metavar="DIR", help="run the executables saved in DIR (needs a GPU)")
    parser.add_argument("--only", default="kernels,zoo,vtc,temco")
    parser.add_argument("--models", default="", help="comma-separated case or model names")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--chip", default="sm_90")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--deadline", type=float, default=1e9, help="seconds after which cases are skipped")
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args()
    groups = set(args.only.split(","))
    names = [n for n in args.models.split(",") if n]
    batches = [int(b) for b in args.batches.split(",")]
    if args.prepare:
        prepare(args.prepare, groups, names, batches, args.chip)
    if args.run:
        run(args.run, args.repeat, not args.no_torch_compile, args.deadline)
    if not args.prepare and not args.run:
        if not torch.cuda.is_available():
            sys.exit("error: no CUDA device here; use --prepare DIR here and --run DIR on a GPU machine")
        with tempfile.TemporaryDirectory() as directory:
            prepare(directory, groups, names, batches, args.chip)
            run(directory, args.repeat, not args.no_torch_compile, args.deadline)


if __name__ == "__main__":
    main()
