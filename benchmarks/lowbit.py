"""Low-bit weight benchmark (Tilus §8.3, issue 6 point 7): CPU GEMV (batch 1) and GEMM (batch 16).

For every type of issue 6 point 1 (int2..int8, uint1..uint8, e4m3, e5m2, e3m3, e3m2, e2m3, e2m2,
e2m1, e1m1) and every Llama-like linear shape (scaled to this 2-core machine: hidden 1024 by default;
`--shapes 1024x1024,1024x2752` adds the MLP up-projection, the Llama-2 ratio 4096:11008), a
`vtmlir.lowbit.quantize`d linear layer (group size 128, as in §8.3) is compiled with
`vtmlir.compile` and timed against the fp32 dense layer compiled the same way, in this one process.
Prints JSON lines (docs/design.md §7):

- `latency_fp32` (ms), timed interleaved with each type's quantised layer: the dense baseline
  (vtmlir's own fp32 matmul: naive scalar loops, as every vtmlir CPU kernel so far);
- `latency_torch_fp32` (ms), also interleaved: torch's fp32 `F.linear` (MKL/oneDNN, one thread),
  for context;
- `latency` (ms) and `latency_ratio` (quantised / dense, baseline `vtmlir_fp32_dense`) per type, and
  `latency_ratio_torch` (quantised / torch fp32);
- `weight_bytes_ratio`: packed codes + scales + zero points over the fp32 weight bytes;
- `max_abs_err`: compiled quantised output vs the PyTorch dequantise-then-matmul reference.

The quantised model is compiled as `vtmlir.compile` does by default (`lowbit="vector"`: `subbyte-pack,
subbyte-lower{cpu-vectorize=1}`, the weight packed at compile time, then word-at-a-time vector loops:
each word of 8 codes unpacked and converted once per block of rows, lowbit/cpu_matmul.py;
docs/lowbit.md). `--lowering portable` uses the portable fused scalar loop of `subbyte-lower`,
`--lowering unfused` no low-bit passes at all (`lowbit=None`: the imported dequantise-then-matmul
graph), for comparison.

    python benchmarks/lowbit.py [--types u4,i3,e2m2] [--shapes 1024x1024] [--batches 1,16]
                                [--repeat N] [--lowering vector|portable|unfused] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import vtmlir
from jsonl import Reporter
from vtmlir.lowbit import parse_dtype, quantize
from vtmlir.lowbit.quantize import QuantizedLinear

SUITE = "lowbit"
ISSUE_TYPES = ([f"i{n}" for n in range(2, 9)] + [f"u{n}" for n in range(1, 9)]
               + ["e4m3", "e5m2", "e3m3", "e3m2", "e2m3", "e2m2", "e2m1", "e1m1"])
SHAPES = "1024x1024"   # K x N; add 1024x2752 (the MLP up-projection) with --shapes
QUICK_TYPES = "i4,u4,e2m1,e3m2,e1m1"
LOWERINGS = {"vector": "vector", "portable": "portable", "unfused": None}  # --lowering -> compile(lowbit=)


emit = Reporter(SUITE).emit


def interleaved_medians(fns, repeat: int) -> list[float]:
    """Median wall time (s) of each of `fns`, their calls interleaved (one warm-up call each): on a
    shared machine whose load drifts, every function sees the same load, so ratios stay meaningful."""
    samples = [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(repeat):
        for fn, out in zip(fns, samples):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return [statistics.median(out) for out in samples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", default=",".join(ISSUE_TYPES))
    parser.add_argument("--shapes", default=SHAPES, help="comma-separated KxN")
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--group-size", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--lowering", choices=sorted(LOWERINGS), default="vector",
                        help="vector: CPU vector loops (default); portable: the fused scalar loop; "
                             "unfused: the imported dequantise-then-matmul graph")
    parser.add_argument("--quick", action="store_true",
                        help=f"types {QUICK_TYPES}, shape 1024x1024, repeat 10")
    args = parser.parse_args()
    if args.quick:
        args.types, args.shapes, args.repeat = QUICK_TYPES, "1024x1024", 10
    torch.set_num_threads(1)  # vtmlir's CPU kernels are single-threaded: compare like with like
    types = [parse_dtype(t) for t in args.types.split(",")]
    for shape in args.shapes.split(","):
        K, N = (int(v) for v in shape.lower().split("x"))
        torch.manual_seed(0)
        dense = torch.nn.Sequential(torch.nn.Linear(K, N, bias=False)).eval()
        quantized = {t: quantize(dense, dtype=t, group_size=args.group_size) for t in types}
        for batch in (int(b) for b in args.batches.split(",")):
            x = torch.randn(batch, K)
            case = f"K{K}_N{N}_B{batch}"
            compiled = vtmlir.compile(dense, x)

            def torch_dense():
                with torch.no_grad():
                    return dense(x)

            for t, q in quantized.items():
                cq = vtmlir.compile(q, x, lowbit=LOWERINGS[args.lowering])
                dense_s, torch_s, q_s = interleaved_medians([lambda: compiled(x), torch_dense, lambda: cq(x)],
                                                            args.repeat)
                layer = next(m for m in q.modules() if isinstance(m, QuantizedLinear))
                with torch.no_grad():
                    err = (cq(x) - q(x)).abs().max().item()
                tcase = f"{case}_{t.name}"
                emit(tcase, "latency_fp32", round(dense_s * 1e3, 4), "ms")
                emit(tcase, "latency_torch_fp32", round(torch_s * 1e3, 4), "ms")
                emit(tcase, "latency", round(q_s * 1e3, 4), "ms")
                emit(tcase, "latency_ratio", round(q_s / dense_s, 3), "x",
                     baseline=f"vtmlir_fp32_dense (quantised: {args.lowering} lowering)")
                emit(tcase, "latency_ratio_torch", round(q_s / torch_s, 3), "x", baseline="torch_fp32_linear")
                emit(tcase, "weight_bytes_ratio", round(layer.weight_bytes() / (4 * K * N), 4), "x",
                     baseline="fp32_dense")
                emit(tcase, "max_abs_err", float(f"{err:.3g}"), "abs", baseline="torch_dequant_matmul")

if __name__ == "__main__":
    main()
