"""GPU kernels and models on a real NVIDIA GPU (issue 22 point 5): vtmlir's CUDA executables against
torch CUDA eager (cuBLAS/cuDNN for contractions), torch.compile (inductor) and, for the matmuls,
cuBLAS through torch.mm. Prints JSON lines (benchmarks/README.md).

Compiling needs the compiler's own dependencies (torch-mlir, llvmlite, the nvcc wheel); running needs
a GPU. Where one machine has both, one command does everything; otherwise compile on the build machine
and run the saved executables (`CudaExecutable.save` / `vtmlir.backend.cuda.load`) on the GPU machine:

    python benchmarks/gpu.py                                  # compile and run here
    python benchmarks/gpu.py --prepare DIR [--chip sm_90]     # compile, save to DIR (no GPU needed)
    python benchmarks/gpu.py --run DIR [--deadline 420]       # run what DIR holds (GPU machine)
    options: [--only kernels,zoo,vtc,temco,tilus,dynamic] [--models a,b] [--dtypes f32,f16,bf16] [--batches 1,8]
             [--opt-levels 0,2]
             [--repeat 20] [--no-torch-compile]

Per case:
- `max_abs_err` / `max_rel_err`: vtmlir's result (`compiled(*cuda tensors)`, the whole call path)
  against torch eager on the GPU with the same weights and inputs, and `ok` within the tolerance of
  the case's dtype (f32 1e-3 relative to the output's largest magnitude, f16 2e-2, bf16 5e-2: three
  fewer mantissa bits than f16, both sides rounding every layer's output to bf16);
- `device_time` of vtmlir (`compiled.profile`: CUDA events around the launch sequence, inputs resident:
  no host copies timed), torch eager and torch.compile (CUDA events around the call), in µs, and
  `time_ratio` vtmlir / contender (below 1: vtmlir is faster);
- kernels: TFLOP/s (matmul) or GB/s of bytes read + written (softmax, LayerNorm, RMSNorm; the
  batch-1 Linears `gemv_*`: W's bytes, the gemv schedule against cuBLAS's GEMV), with the
  fraction of the H100/H200 datasheet peak; models: kernel count and per schedule kind, and the three
  slowest kernels with their schedule;
- `call_time`: wall time of `compiled(*tensors)` with torch CUDA tensors in and out (host copies
  included: the runtime moves data through numpy) — what a user's call costs today;
- the CUDA graph (a call's launches replayed by one `cuGraphLaunch`, the default) against one
  `cuLaunchKernel` per kernel: `device_time` of contender `vtmlir-launches` (the per-kernel sequence,
  CUDA events around it) and `graph_speedup` (per-kernel time / graph time, with `call_speedup`
  from `call_time` of both paths); vtmlir's `device_time` is the graph's (`cuda_graph` true) unless
  the runtime could not make one (`graph_reason`).
torch.compile is skipped (a line with value null and the reason) once `--deadline` seconds are half
spent: on a lent machine the budget is minutes.

`--only tilus` (not in the default set): the Tilus quantised matmul kernels (`QuantizedMatmulKernel`,
mma.sync and FMA modes; `tilus_cases`), launched from the saved cubin through the driver API
(`gpu_matmul.LoadedKernel`) on torch's buffers. Prepare saves the cubin, PTX and digests only; the GPU
machine quantises and packs the same seeded weights again (numpy + torch-mlir's IR for the Fig. 8
position map) and checks the digests. Per case: errors against `gpu_matmul.reference` (f64 sums;
tolerance 1e-4 of the largest output: the kernels differ only by f32 summation order), device time
with L2 flushed between runs (and warm, launched back to back) against cuBLAS f16 on the dequantised
weight and torch's own dequantise-then-matmul (`QuantizedLinear`), weight GB/s with the fraction of
the datasheet HBM peak and of a measured 1 GiB copy, TFLOP/s. A case that breaks the CUDA context hands the remaining ones
to a fresh process.

`--only dynamic` (not in the default set): `vtmlir.compile(..., target="cuda", dynamic_shapes=...)`
of benchmarks/dvm.py's MLP (Linear 32->64, ReLU, Linear 64->16, batch in [1, 64]): DVM's PTX VM
(`dynamic.CudaDynamicExecutable`). Prepare saves it (`save`: the IR, the VM's PTX, launch and
cubin); the GPU machine loads it (`dynamic.load_dynamic`: the templates are built again there,
`load_time`) and, per batch of `DYNAMIC_BATCHES` (never seen before, then one seen again), checks
the result against torch eager on the CPU (`max_abs_err`, `ok`), and times the first call (the
per-shape fill and the kernels' device buffers) and the median later call (`call_time`, wall, CPU
tensors in and out: every kernel's arguments cross the bus), with torch eager on the GPU for scale.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

from jsonl import Fn, Reporter

SUITE = "gpu"
emit = Reporter(SUITE).emit
TOLERANCE = {"f32": 1e-3, "f16": 2e-2, "bf16": 5e-2}
#: The element types of the kernels and the zoo (`--dtypes` picks some); bf16 contractions run on
#: bf16 mma.sync, whose dense peak on an H100/H200 is f16's.
DTYPES = ("f32", "f16", "bf16")
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
    itemsize = 2 if dtype in ("f16", "bf16") else 4
    if kind == "gemv":  # a batch-1 Linear (decode): y = x W^T, W n x n read once (an input: no weights saved)
        return Fn(torch.nn.functional.linear), [(1, n), (n, n)], dtype, itemsize * n * n, "GB/s"
    module = {"softmax": lambda: torch.nn.Softmax(-1), "layernorm": lambda: torch.nn.LayerNorm(n),
              "rmsnorm": lambda: torch.nn.RMSNorm(n, eps=1e-6)}[kind]()
    return module.eval(), [(n, n)], dtype, 2 * itemsize * n * n, "GB/s"


KERNELS = ["matmul_f16_4096", "matmul_f16_2048", "matmul_f32_2048", "bmm_f16_1024",
           "softmax_f32_4096", "layernorm_f32_4096", "rmsnorm_f32_4096", "softmax_f16_4096",
           "matmul_bf16_4096", "bmm_bf16_1024", "gemv_f16_4096", "gemv_f32_4096", "gemv_bf16_4096"]


def torch_dtype(dtype: str):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]


def cast(tensors, dtype: str):
    return tuple(t.to(torch_dtype(dtype)) if t.is_floating_point() else t for t in tensors)


# -- prepare (any machine with the compiler) ---------------------------------------------------------

def model_cases(groups: set[str], names: list[str] | None, batches: list[int], dtypes=DTYPES, opt_levels=(2,)):
    """(case, model name, batch, dtype, opt level) of the model benchmarks (the zoo in `dtypes`; a
    level other than the default 2 in the case's name: `vtc_llama3_decode_f32_b1_O0`)."""
    from vtmlir import models

    chosen = []
    if "zoo" in groups:
        chosen += [(n, d) for n in models.ZOO for d in DTYPES if d in dtypes]
    if "vtc" in groups:
        chosen += [(n, "f32") for n in models.VTC_ZOO]
    if "temco" in groups:
        chosen += [(n, "f32") for n in ("temco_resnet18", "temco_vgg11", "temco_unet_small", "temco_densenet_small")]
    for name, dtype in chosen:
        if names and name not in names:
            continue
        for batch in batches:
            for level in opt_levels:
                suffix = "" if level == 2 else f"_O{level}"
                yield f"{name}_{dtype}_b{batch}{suffix}", name, batch, dtype, level


def fingerprint(model) -> dict:
    """Per weight: shape, sum and sum of magnitudes (float64): equal models give equal fingerprints."""
    return {k: (tuple(v.shape), float(v.double().sum()), float(v.double().abs().sum()))
            for k, v in model.state_dict().items() if v.is_floating_point()}


def same_weights(model, saved: dict) -> bool:
    mine = fingerprint(model)
    return mine.keys() == saved.keys() and all(
        mine[k][0] == saved[k][0] and all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(mine[k][1:], saved[k][1:]))
        for k in saved)


def prepare(directory: str, groups: set[str], names, batches, chip: str, dtypes=DTYPES, opt_levels=(2,)) -> None:
    import vtmlir

    os.makedirs(directory, exist_ok=True)
    if "tilus" in groups:
        prepare_tilus(directory, names, chip)
    if "dynamic" in groups:
        prepare_dynamic(directory, names, chip)
    jobs = []
    if "kernels" in groups:
        for name in KERNELS:
            if (not names or name in names) and name.split("_")[1] in dtypes:
                module, shapes, dtype, _, _ = kernel_case(name)
                gen = torch.Generator().manual_seed(0)
                inputs = tuple(torch.randn(*s, generator=gen) for s in shapes)
                jobs.append((name, {"kind": "kernel", "name": name, "dtype": dtype, "opt_level": 2}, module,
                             cast(inputs, dtype)))
    for case, name, batch, dtype, level in model_cases(groups, names, batches, dtypes, opt_levels):
        from vtmlir import models

        model, inputs = models.get(name).build(batch=batch, seed=0)
        model = model.eval().to(torch_dtype(dtype))
        inputs = cast(inputs, dtype)
        # Neither inputs nor weights are saved (KV caches are tens of MB, weights as many, and a lent
        # machine takes 64 MiB): the GPU machine builds the model again from the same seed and checks
        # the weights against this fingerprint (torch's CPU generator gives the same numbers across
        # versions; a mismatch is reported, and the numerics line says so).
        jobs.append((case, {"kind": "model", "name": name, "batch": batch, "dtype": dtype, "opt_level": level,
                            "fingerprint": fingerprint(model)}, model, inputs))
    for case, meta, module, inputs in jobs:
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            exe = vtmlir.compile(module, *inputs, target="cuda", chip=chip, opt_level=meta["opt_level"])
            exe.assemble(chip)
            exe.report()   # cached in the executable: ptxas -v needs the nvcc wheel, absent on the GPU machine
        except Exception as err:  # noqa: BLE001 - a benchmark records a failure and goes on
            emit(case, "compile_time", None, "s", reason=f"{type(err).__name__}: {str(err)[:300]}")
            continue
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        exe.stages = {}   # the IR of every stage: not needed to run, and the transfer is small
        for kernel in exe.kernels:
            kernel.llvm_ir = ""   # neither (the cubins and the PTX run): 40% of a saved model
        # The module's pytree call spec is torch's own object, which another torch version (the GPU
        # machine's) may not unpickle; these cases take and return plain tensors, the flat convention.
        exe.call_spec = None
        exe.save(os.path.join(directory, f"{case}.vtcuda"))
        meta.update(compile_wall_s=wall, compile_cpu_s=cpu)
        with open(os.path.join(directory, f"{case}.case"), "wb") as f:
            pickle.dump(meta, f)
        emit(case, "compile_time", round(cpu, 2), "s", clock="cpu", wall=round(wall, 2), kernels=len(exe.kernels))


# -- dynamic shapes: DVM's PTX VM (vtmlir.dynamic.CudaDynamicExecutable) ------------------------------

DYNAMIC_CASE = "dynamic_mlp_f32"
#: the batches run, in order: never seen, then 7 again (its device buffers reused)
DYNAMIC_BATCHES = (1, 7, 33, 64, 7)


def dynamic_model():
    """The MLP of benchmarks/dvm.py's compile_dynamic, seeded (rebuilt on the GPU machine)."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)).eval()


def prepare_dynamic(directory: str, names, chip: str) -> None:
    import vtmlir
    from torch.export import Dim

    if names and DYNAMIC_CASE not in names:
        return
    model = dynamic_model()
    w0, c0 = time.perf_counter(), time.process_time()
    try:
        exe = vtmlir.compile(model, torch.randn(4, 32), target="cuda", chip=chip,
                             dynamic_shapes={"input": {0: Dim("batch", min=1, max=64)}})
        exe.save(os.path.join(directory, f"{DYNAMIC_CASE}.vtdyn"))
    except Exception as err:  # noqa: BLE001 - a benchmark records a failure and goes on
        emit(DYNAMIC_CASE, "compile_time", None, "s", reason=f"{type(err).__name__}: {str(err)[:300]}")
        return
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    meta = {"kind": "dynamic", "name": DYNAMIC_CASE, "dtype": "f32", "fingerprint": fingerprint(model),
            "compile_wall_s": wall, "compile_cpu_s": cpu}
    with open(os.path.join(directory, f"{DYNAMIC_CASE}.case"), "wb") as f:
        pickle.dump(meta, f)
    emit(DYNAMIC_CASE, "compile_time", round(cpu, 2), "s", clock="cpu", wall=round(wall, 2), chip=chip,
         prebuilt=exe.prebuilt["points"] if exe.prebuilt else 0)


def run_dynamic_case(directory: str, case: str, meta: dict, repeat: int) -> None:
    from vtmlir.dynamic import load_dynamic

    w0 = time.perf_counter()
    exe = load_dynamic(os.path.join(directory, f"{case}.vtdyn"))
    emit(case, "load_time", round(time.perf_counter() - w0, 2), "s", clock="wall")
    model = dynamic_model()
    weights_match = same_weights(model, meta["fingerprint"])
    on_gpu = dynamic_model().to("cuda")
    gen = torch.Generator().manual_seed(0)
    try:
        for batch in DYNAMIC_BATCHES:
            x = torch.randn(batch, 32, generator=gen)
            w0 = time.perf_counter()
            (got,) = exe.run(x)
            first = time.perf_counter() - w0
            with torch.no_grad():
                want = model(x)
            abs_err, rel_err = errors(got, want)
            row = f"{case}_b{batch}"
            emit(row, "max_abs_err", abs_err, "", baseline="eager (CPU)", max_rel_err=rel_err,
                 ok=bool(rel_err <= TOLERANCE["f32"]) if weights_match else None, tolerance=TOLERANCE["f32"],
                 **({} if weights_match else {"reason": "the rebuilt model's weights differ from the compiled ones"}))
            calls = []
            for _ in range(repeat):
                w0 = time.perf_counter()
                exe.run(x)
                calls.append(time.perf_counter() - w0)
            emit(row, "call_time", round(statistics.median(calls) * 1e6, 1), "us", clock="wall",
                 first_call_us=round(first * 1e6, 1), launches=exe.device().launches)
            xg = x.to("cuda")
            with torch.no_grad():
                eager = cuda_time(lambda: on_gpu(xg), repeat)
            emit(row, "device_time", round(eager * 1e6, 2), "us", contender="eager")
        emit(case, "report", str(exe.report()).splitlines()[-1], "")
    finally:
        if exe._device is not None:
            exe._device.close()


# -- the Tilus quantised matmul kernels (vtmlir.lowbit.gpu_matmul) ---------------------------------------

#: (K, N, types): the Llama-7B projection shapes; every type at 4096 x 4096, the Marlin-class u4 also at
#: the MLP's 4096 x 11008. Group size 128 (the GPTQ/AWQ/Marlin default).
TILUS_SHAPES = ((4096, 4096, ("u4", "i8", "e3m2", "e2m1")), (4096, 11008, ("u4",)))
TILUS_GROUP = 128
TILUS_SEED = 0
#: Relative to the largest |reference|. Both kernels sum exact products in f32 in their own order (the
#: tensor cores round their f32 accumulation their own way, ~2^-22 per k16 step): ~1e-6 expected at
#: K = 4096. One wrong scale moves the result by ~1e-1, one wrong u4 code by ~2e-3.
TILUS_TOLERANCE = 1e-4
#: Bytes zeroed between timed launches so the weights come from HBM, not from L2 (50 MiB on H100/H200).
L2_FLUSH_BYTES = 256 << 20


def tilus_cases():
    """(case, dtype, m, n, k, mode): per type and shape a GEMV and a GEMM (M = 64) in both modes; the
    mma kernel's GEMV is M = 16 (mma.sync tiles M by 16), the FMA kernel's M = 1."""
    for k, n, types in TILUS_SHAPES:
        for dtype in types:
            for mode in ("mma", "fma"):
                for m in ((16 if mode == "mma" else 1), 64):
                    yield f"tilus_{dtype}_{mode}_m{m}_k{k}_n{n}", dtype, m, n, k, mode


def tilus_weight(dtype: str, n: int, k: int, seed: int):
    """The quantised [N, K] weight of a case, from numpy's seeded generator (the same on both machines)."""
    from vtmlir.lowbit.quantize import quantize_weight

    w = np.random.default_rng(seed).standard_normal((n, k), dtype=np.float32)
    return quantize_weight(w, dtype, TILUS_GROUP)


def tilus_input(m: int, k: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed + 1).standard_normal((m, k), dtype=np.float32).astype(np.float16)


def digest(*arrays) -> str:
    """A short sha256 of the arrays' bytes (None skipped)."""
    h = hashlib.sha256()
    for a in arrays:
        if a is not None:
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def prepare_tilus(directory: str, names, chip: str) -> None:
    """Build, lower and assemble the kernels; save per case its cubin and PTX and a `.case` with the
    launch shape and digests of its buffers. The buffers themselves (8-16 MB of incompressible codes
    per case) are not saved: the GPU machine quantises and packs the same seeded weight again."""
    from vtmlir.backend.cuda.ptxas import assemble, resource_usage
    from vtmlir.lowbit.gpu_kernels import MMA_B_LAYOUT, fma_b_layout
    from vtmlir.lowbit.gpu_matmul import QuantizedMatmulKernel, ptx_batch

    built, weights = [], {}
    for case, dtype, m, n, k, mode in tilus_cases():
        if names and case not in names:
            continue
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            if (dtype, n, k) not in weights:
                weights[(dtype, n, k)] = tilus_weight(dtype, n, k, TILUS_SEED)
            qweight = weights[(dtype, n, k)]
            kernel = QuantizedMatmulKernel.build(qweight, m=m, mode=mode, name=f"lowbit_{mode}_{dtype}_m{m}_n{n}")
        except Exception as err:  # noqa: BLE001 - a benchmark records a failure and goes on
            emit(case, "compile_time", None, "s", reason=f"{type(err).__name__}: {str(err)[:300]}")
            continue
        layout = MMA_B_LAYOUT if kernel.mode == "mma" else fma_b_layout(kernel.block[0])
        meta = {"kind": "tilus", "name": case, "dtype": dtype, "m": m, "n": n, "k": k, "mode": kernel.mode,
                "group_size": TILUS_GROUP, "seed": TILUS_SEED, "function": kernel.name, "grid": kernel.grid,
                "block": kernel.block, "tile_layout": layout, "zeros": kernel.zeros is not None,
                "weight_bytes": int(kernel.packed.nbytes - 8 + kernel.scales.nbytes
                                    + (0 if kernel.zeros is None else kernel.zeros.nbytes)),
                "digest": digest(kernel.packed, kernel.scales, kernel.zeros), "x_digest": digest(tilus_input(m, k, TILUS_SEED))}
        built.append((case, kernel, meta, time.perf_counter() - w0, time.process_time() - c0))
    if not built:
        return
    w0, c0 = time.perf_counter(), time.process_time()
    try:
        ptx = ptx_batch([kernel for _, kernel, _, _, _ in built], "sm_90" if chip == "sm_90a" else chip)
    except Exception as err:  # noqa: BLE001
        for case, *_ in built:
            emit(case, "compile_time", None, "s", reason=f"{type(err).__name__}: {str(err)[:300]}")
        return
    share = ((time.perf_counter() - w0) / len(built), (time.process_time() - c0) / len(built))
    for case, kernel, meta, wall, cpu in built:
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            text = ptx[kernel.name]
            cubin = assemble(text, chip, kernel.name)
            usage = resource_usage(text, chip, kernel.name)
        except Exception as err:  # noqa: BLE001
            emit(case, "compile_time", None, "s", reason=f"{type(err).__name__}: {str(err)[:300]}")
            continue
        wall += share[0] + time.perf_counter() - w0
        cpu += share[1] + time.process_time() - c0
        meta.update(chip=chip, registers=usage.registers, shared_bytes=usage.shared_bytes,
                    spill_bytes=usage.spill_bytes, compile_wall_s=wall, compile_cpu_s=cpu)
        with open(os.path.join(directory, f"{case}.cubin"), "wb") as f:
            f.write(cubin)
        with open(os.path.join(directory, f"{case}.ptx"), "w") as f:
            f.write(text)
        with open(os.path.join(directory, f"{case}.case"), "wb") as f:
            pickle.dump(meta, f)
        emit(case, "compile_time", round(cpu, 2), "s", clock="cpu", wall=round(wall, 2), mode=kernel.mode,
             grid=list(kernel.grid), block=list(kernel.block), registers=usage.registers,
             shared_bytes=usage.shared_bytes, spill_bytes=usage.spill_bytes)


_TILUS_WEIGHTS: dict = {}


def tilus_buffers(meta: dict):
    """(qweight, x, the kernel's input buffers (numpy, parameter order, y left out), inputs_match) of
    a saved case, rebuilt from the seed; `inputs_match` says whether they equal the digests taken
    when the kernel was built. The quantised weight is cached across the cases that share it."""
    from vtmlir.lowbit.gpu_matmul import kernel_parameters, pack_for_layout

    key = (meta["dtype"], meta["n"], meta["k"], meta["seed"])
    if key not in _TILUS_WEIGHTS:
        _TILUS_WEIGHTS.clear()   # one weight at a time: the cases come in weight order
        _TILUS_WEIGHTS[key] = (tilus_weight(*key), {})
    qweight, packings = _TILUS_WEIGHTS[key]
    if meta["tile_layout"] not in packings:
        packings[meta["tile_layout"]] = pack_for_layout(qweight, meta["tile_layout"])
    packed = packings[meta["tile_layout"]]
    scales = qweight.scales.astype(np.float32)
    zeros = qweight.zeros.astype(np.float32) if meta["zeros"] else None
    x = tilus_input(meta["m"], meta["k"], meta["seed"])
    match = digest(packed, scales, zeros) == meta["digest"] and digest(x) == meta["x_digest"]
    return qweight, x, kernel_parameters(x, packed, scales, zeros, None)[:-1], match


def cuda_time_flushed(fn, repeat: int, flush) -> float:
    """Median seconds of `fn()` (CUDA events around it alone), with `flush` zeroed before each run
    so that no operand is left in L2 by the previous run; one warm-up call first. The zeroing (~0.1
    ms) is still running when `fn` is enqueued, so the host's launch cost is not in the time."""
    return cuda_time(fn, repeat, before=flush.zero_)


def cuda_time_back_to_back(fn, repeat: int) -> float:
    """Seconds per `fn()` over `repeat` calls enqueued back to back between two CUDA events (median of
    3 such batches, after a warm-up call): L2 warm, and the host's launch cost hidden behind the
    previous call wherever a call takes longer on the GPU than to enqueue."""
    fn()
    torch.cuda.synchronize()
    batches = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeat):
            fn()
        end.record()
        end.synchronize()
        batches.append(start.elapsed_time(end) / 1e3 / repeat)
    return statistics.median(batches)


def copy_bandwidth(repeat: int) -> float:
    """GB/s of a 1 GiB device-to-device copy (bytes read + written): what HBM gives in practice."""
    src = torch.empty(1 << 29, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() / cuda_time(lambda: dst.copy_(src), repeat) / 1e9


def run_tilus_case(directory: str, case: str, meta: dict, repeat: int, peaks: dict, copy_gbs: float) -> None:
    """One Tilus kernel case on the GPU: numerics against `gpu_matmul.reference`, device time with
    L2 flushed (and warm, back to back), against cuBLAS f16 on the dequantised weight and torch's own
    dequantise-then-matmul (`QuantizedLinear`), weight GB/s and TFLOP/s with fractions of peak."""
    from vtmlir.lowbit.gpu_matmul import LoadedKernel, reference
    from vtmlir.lowbit.quantize import QuantizedLinear

    qweight, x, arrays, inputs_match = tilus_buffers(meta)
    m, n, k = meta["m"], meta["n"], meta["k"]
    tensors = [torch.from_numpy(a).cuda() for a in arrays]
    y = torch.zeros((m, n), dtype=torch.float32, device="cuda")
    pointers = [t.data_ptr() for t in tensors + [y]]
    path = os.path.join(directory, f"{case}.cubin")
    with open(path, "rb") as f:
        kernel = LoadedKernel(f.read(), meta["function"], meta["grid"], meta["block"])
    try:
        kernel.launch(pointers)
        wait_or_hang(case)
        got = y.cpu().numpy()
        want = reference(qweight, x)
        err = float(np.abs(got.astype(np.float64) - want).max())
        rel = err / max(float(np.abs(want).max()), 1e-30)
        emit(case, "max_abs_err", err, "", baseline="reference_f64", max_rel_err=rel,
             ok=bool(rel <= TILUS_TOLERANCE) if inputs_match else None, tolerance=TILUS_TOLERANCE,
             mode=meta["mode"], dtype=meta["dtype"], m=m, n=n, k=k,
             **({} if inputs_match else {"reason": "the rebuilt weight or input differs from the prepared digest"}))
        y.zero_()
        kernel.launch(pointers)
        torch.cuda.synchronize()
        emit(case, "repeatable", bool(np.array_equal(y.cpu().numpy(), got)), "")

        flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
        x16 = tensors[0]
        w16 = torch.from_numpy(qweight.dequantize()).cuda().half()
        linear = QuantizedLinear(qweight).cuda()
        runs = {"vtmlir": lambda: kernel.launch(pointers), "cublas_f16": lambda: x16 @ w16.T,
                "torch_dequant": lambda: linear(x16)}
        weight_bytes = {"vtmlir": meta["weight_bytes"], "cublas_f16": 2 * n * k, "torch_dequant": meta["weight_bytes"]}
        times = {}
        with torch.no_grad():
            for name, fn in runs.items():
                times[name] = cuda_time_flushed(fn, repeat, flush)
                warm = cuda_time_back_to_back(fn, repeat)
                extra = {}
                if name == "vtmlir":
                    extra = dict(mode=meta["mode"], grid=list(meta["grid"]), block=list(meta["block"]),
                                 registers=meta.get("registers"), spill_bytes=meta.get("spill_bytes"))
                else:
                    out = fn().float().cpu().numpy().astype(np.float64)
                    extra = dict(max_rel_err=float(np.abs(out - want).max()) / max(float(np.abs(want).max()), 1e-30))
                emit(case, "device_time", round(times[name] * 1e6, 2), "us", contender=name, l2="flushed",
                     warm_l2_us=round(warm * 1e6, 2), **extra)
        for name, seconds in times.items():
            if name != "vtmlir":
                emit(case, "time_ratio", round(times["vtmlir"] / seconds, 3), "", baseline=name)
        for name, seconds in times.items():
            gbs = weight_bytes[name] / seconds / 1e9
            emit(case, "weight_bandwidth", round(gbs, 1), "GB/s", contender=name, weight_bytes=weight_bytes[name],
                 fraction_of_peak=round(gbs / peaks["hbm_gbs"], 3), fraction_of_copy=round(gbs / copy_gbs, 3))
            tflops = 2 * m * n * k / seconds / 1e12
            emit(case, "throughput", round(tflops, 3), "TFLOP/s", contender=name,
                 fraction_of_peak=round(tflops / peaks["f16_tflops"], 4))
    finally:
        kernel.close()


#: Seconds the first launch of a case may take (a correct one takes well under a millisecond).
TILUS_HANG_S = 10.0


class KernelHang(Exception):
    """The first launch of a case has not finished after `TILUS_HANG_S` (a deadlock at a barrier,
    say): nothing more can run in this process, the kernel holds the GPU until the process ends."""


def wait_or_hang(case: str) -> None:
    done = torch.cuda.Event()
    done.record()
    start = time.perf_counter()
    while not done.query():
        if time.perf_counter() - start > TILUS_HANG_S:
            raise KernelHang(f"{case}: the kernel has not finished after {TILUS_HANG_S:g} s")
        time.sleep(1e-3)
    torch.cuda.synchronize()


def cuda_healthy() -> bool:
    """False once the CUDA context is broken (an illegal address or a trap is sticky: every later
    call in this process fails)."""
    try:
        (torch.ones(1, device="cuda") + 1).item()
        torch.cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001
        return False


# -- run (GPU machine) --------------------------------------------------------------------------------

def cuda_time(fn, repeat: int, before=None) -> float:
    """Median seconds of `fn()` on the GPU (CUDA events), after one warm-up call; `before()` (not
    timed) ahead of each run."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
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
        calls = call_times(exe, inputs)
        call = calls["graph"]
        # The buffers stay on the device between calls: after all those runs, the same inputs must
        # still give the same result, bit for bit.
        again = exe(*[t.clone() for t in inputs])
        pairs = zip(again if isinstance(again, tuple) else (again,), got if isinstance(got, tuple) else (got,))
        emit(case, "repeatable", all(torch.equal(a.cpu(), b.cpu()) for a, b in pairs), "")
    emit(case, "device_time", round(ours * 1e6, 2), "us", contender="vtmlir", kernels=len(exe.kernels),
         schedules=summary(exe), call_time_us=round(call * 1e6, 1), cuda_graph=profile["cuda_graph"],
         **({} if profile["cuda_graph"] else {"graph_reason": profile["graph_reason"]}))
    emit_graph_gain(case, profile, calls)
    for name, seconds in contenders.items():
        emit(case, "device_time", round(seconds * 1e6, 2), "us", contender=name)
        emit(case, "time_ratio", round(ours / seconds, 3), "", baseline=name)
    if work is not None:
        scale = 1e12 if unit == "TFLOP/s" else 1e9
        peak = (peaks["f16_tflops"] if dtype in ("f16", "bf16") else peaks["f32_tflops"]) if unit == "TFLOP/s" \
            else peaks["hbm_gbs"]
        for name, seconds in [("vtmlir", ours)] + list(contenders.items()):
            rate = work / seconds / scale
            emit(case, "throughput", round(rate, 2), unit, contender=name, fraction_of_peak=round(rate / peak, 3))
    slowest = sorted(zip(exe.kernels, (t for _, t in profile["kernels"])), key=lambda kt: -kt[1])[:3]
    emit(case, "slowest_kernels", [{"kernel": k.name, "schedule": k.schedule, "us": round(t * 1e6, 2),
                                    "h100_estimate_us": round(row.h100_estimate_s * 1e6, 2) if row else None}
                                   for (k, t), row in ((kt, report_row(exe, kt[0].name)) for kt in slowest)], "")


def call_times(exe, inputs, seconds: float = 0.2) -> dict:
    """Mean wall time of `exe(*inputs)` (host copies included) with the kernels launched
    as the executable's CUDA graph ("graph": what a call does by default; per-kernel launches where
    the runtime has no graph) and one `cuLaunchKernel` each ("launches": `runtime().use_graph =
    False`), each run for at least 3 calls and `seconds`, interleaved in two halves."""
    runtime = exe.runtime()
    saved = runtime.use_graph
    totals, counts = {"graph": 0.0, "launches": 0.0}, {"graph": 0, "launches": 0}
    try:
        for _ in range(2):
            for path in ("graph", "launches"):
                runtime.use_graph = path == "graph"
                w0 = time.perf_counter()
                calls = 0
                while calls < 3 or time.perf_counter() - w0 < seconds / 2:
                    exe(*inputs)
                    calls += 1
                totals[path] += time.perf_counter() - w0
                counts[path] += calls
    finally:
        runtime.use_graph = saved
    return {path: totals[path] / counts[path] for path in totals}


def emit_graph_gain(case: str, profile: dict, calls: dict) -> None:
    """The CUDA graph against per-kernel launches: device time of the sequence (CUDA events around
    it: `profile`'s graph and per-kernel totals) and wall time of a call (`call_times`)."""
    launches, graph = profile["launches_total_s"], profile.get("graph_total_s")
    emit(case, "device_time", round(launches * 1e6, 2), "us", contender="vtmlir-launches",
         call_time_us=round(calls["launches"] * 1e6, 1))
    if graph is None:
        emit(case, "graph_speedup", None, "", reason=f"no CUDA graph: {profile.get('graph_reason')}")
        return
    emit(case, "graph_speedup", round(launches / graph, 3), "", baseline="vtmlir-launches",
         graph_us=round(graph * 1e6, 2), launches_us=round(launches * 1e6, 2),
         call_speedup=round(calls["launches"] / calls["graph"], 3))


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


def run(directory: str, repeat: int, with_compile: bool, deadline: float, names=None) -> None:
    from vtmlir.backend.cuda import load

    start = time.perf_counter()
    name, peaks = device_peaks()
    emit("device", "name", name, "", torch=torch.__version__, peaks=peaks)
    cases = sorted(f[:-5] for f in os.listdir(directory) if f.endswith(".case"))
    tilus_order = [case for case, *_ in tilus_cases()]
    def order(case: str) -> tuple:
        """The Tilus kernels, the kernels (in `KERNELS` order), then the zoo, VTC and TeMCO models:
        torch.compile, skipped once half the deadline is spent, reaches the first ones."""
        meta = metas[case]
        if meta["kind"] == "dynamic":
            return (-2, 0, case)
        if meta["kind"] == "tilus":
            return (-1, tilus_order.index(case) if case in tilus_order else len(tilus_order), case)
        if meta["kind"] == "kernel":
            return (0, KERNELS.index(case) if case in KERNELS else len(KERNELS), case)
        group = 3 if meta["name"].startswith("temco_") else 2 if meta["name"].startswith("vtc_") else 1
        return (group, meta["batch"], case)

    metas = {}
    for case in cases:
        with open(os.path.join(directory, f"{case}.case"), "rb") as f:
            metas[case] = pickle.load(f)
    cases = [c for c in cases if not names or c in names or metas[c].get("name") in names]
    copy_gbs = None
    ordered = sorted(cases, key=order)
    for index, case in enumerate(ordered):
        elapsed = time.perf_counter() - start
        if elapsed > deadline:
            emit(case, "device_time", None, "us", contender="vtmlir", reason="skipped: deadline")
            continue
        if metas[case]["kind"] == "dynamic":
            try:
                run_dynamic_case(directory, case, metas[case], repeat)
            except Exception as err:  # noqa: BLE001 - one failing case is a result; the others still run
                emit(case, "call_time", None, "us", contender="vtmlir", reason=f"{type(err).__name__}: {str(err)[:400]}")
            sys.stdout.flush()
            continue
        if metas[case]["kind"] == "tilus":
            try:
                if copy_gbs is None:
                    copy_gbs = copy_bandwidth(repeat)
                    emit("device", "copy_bandwidth", round(copy_gbs, 1), "GB/s", fraction_of_peak=round(copy_gbs / peaks["hbm_gbs"], 3))
                run_tilus_case(directory, case, metas[case], repeat, peaks, copy_gbs)
            except KernelHang as err:
                rest = ordered[index + 1:]
                emit(case, "device_time", None, "us", contender="vtmlir", reason=f"KernelHang: {err}; exiting "
                     "(the kernel holds the GPU until this process ends); rerun the rest with --models",
                     rest=",".join(rest))
                sys.stdout.flush()
                os._exit(3)
            except Exception as err:  # noqa: BLE001 - one failing case is a result; the others still run
                emit(case, "device_time", None, "us", contender="vtmlir", reason=f"{type(err).__name__}: {str(err)[:400]}")
                if not cuda_healthy():
                    rest = ordered[index + 1:]
                    emit(case, "cuda_context", None, "", reason="broken by this case; the remaining "
                         f"{len(rest)} cases run in a fresh process")
                    sys.stdout.flush()
                    if rest:
                        subprocess.run([sys.executable, os.path.abspath(__file__), "--run", directory, "--repeat", str(repeat),
                                        "--deadline", str(max(deadline - (time.perf_counter() - start), 1.0)),
                                        "--models", ",".join(rest)] + ([] if with_compile else ["--no-torch-compile"]))
                    return
            sys.stdout.flush()
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
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="element types of the kernels and the zoo "
                        "(comma-separated: f32, f16, bf16; VTC and TeMCO models are f32)")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--chip", default="sm_90")
    parser.add_argument("--opt-levels", default="2", help="opt levels of the model cases (comma-separated; "
                        "0,2 compares the default pipeline with none of vtmlir's graph systems)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--deadline", type=float, default=1e9, help="seconds after which cases are skipped")
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args()
    groups = set(args.only.split(","))
    names = [n for n in args.models.split(",") if n]
    batches = [int(b) for b in args.batches.split(",")]
    dtypes = tuple(d for d in args.dtypes.split(",") if d)
    unknown = set(dtypes) - set(DTYPES)
    if unknown:
        sys.exit(f"error: --dtypes takes {', '.join(DTYPES)}, not {', '.join(sorted(unknown))}")
    opt_levels = tuple(int(level) for level in args.opt_levels.split(",") if level)
    if args.prepare:
        prepare(args.prepare, groups, names, batches, args.chip, dtypes, opt_levels)
    if args.run:
        run(args.run, args.repeat, not args.no_torch_compile, args.deadline, names)
    if not args.prepare and not args.run:
        if not torch.cuda.is_available():
            sys.exit("error: no CUDA device here; use --prepare DIR here and --run DIR on a GPU machine")
        with tempfile.TemporaryDirectory() as directory:
            prepare(directory, groups, names, batches, args.chip, dtypes, opt_levels)
            run(directory, args.repeat, not args.no_torch_compile, args.deadline, names)


if __name__ == "__main__":
    main()
