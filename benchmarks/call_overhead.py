"""Per-call overhead (issue 21 point 3): the time of a call on a function that does almost nothing,
a 4-element f32 add, so that what is measured is the path from Python to the code and back.

Prints JSON lines (benchmarks/README.md). Contenders, interleaved in one process (round robin, each
sample a batch of `--batch` calls; medians over `--samples` samples of wall time and of the process's
CPU time per call, the machine being shared):

- `vtmlir_module`: `compiled(x, y)` of `vtmlir.compile(nn.Module, x, y, threads=1)` (torch tensors in,
  a torch tensor out, the module's calling convention);
- `vtmlir_mlir`: the same function compiled from linalg-on-tensors MLIR text; `vtmlir_numpy`: called
  with numpy arrays;
- `eager`: torch's `x + y`;
- `iree` / `iree_to_host`: IREE's Python runtime (`iree-base-runtime`, the `bench` extra; `local-sync`)
  calling the same MLIR compiled by `iree-base-compiler`, without and with the copy of the result to a
  numpy array (a `null` line where IREE is not installed);
- DVM entry points (`--no-dvm` skips them): `dvm_kernel` (`CompiledKernel(x, y, native=True)`,
  `vtmlir.dvm.compile_graph` of the add), `dvm_vm` (`NativeVM.run_valid` on the kernel's bytecode and
  preallocated arrays), `dvm_function` (`DvmFunction(import_torch(module), native=True)(x, y)`, one core: a
  4-element kernel gains nothing from the thread pool).

Each line: `case` = contender, `metric` = `wall_us` / `cpu_us`, `baseline` = eager's figure.

    python benchmarks/call_overhead.py [--samples 41] [--batch 200] [--no-iree] [--no-dvm]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

import vtmlir
from jsonl import Reporter

SUITE = "call_overhead"
emit = Reporter(SUITE).emit
N = 4
MLIR = f"""func.func @main(%a: tensor<{N}xf32>, %b: tensor<{N}xf32>) -> tensor<{N}xf32> {{
  %e = tensor.empty() : tensor<{N}xf32>
  %r = linalg.add ins(%a, %b : tensor<{N}xf32>, tensor<{N}xf32>) outs(%e : tensor<{N}xf32>) -> tensor<{N}xf32>
  return %r : tensor<{N}xf32>
}}"""


class Add(torch.nn.Module):
    def forward(self, a, b):
        return a + b


def contenders(x, y, iree: bool, dvm: bool) -> tuple[dict, list[str]]:
    """name -> a call, and the reasons of the contenders that cannot run."""
    expected = (x + y).numpy()
    calls, missing = {}, []
    from_module = vtmlir.compile(Add(), x, y, threads=1)
    from_text = vtmlir.compile(MLIR, threads=1)
    xn, yn = x.numpy(), y.numpy()
    calls["vtmlir_module"] = lambda: from_module(x, y)
    calls["vtmlir_mlir"] = lambda: from_text(x, y)
    calls["vtmlir_numpy"] = lambda: from_text(xn, yn)
    calls["eager"] = lambda: x + y
    if iree:
        try:
            import iree.compiler as ireec
            import iree.runtime as ireert

            flags = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                     "--iree-llvmcpu-target-cpu=host"]
            context = ireert.SystemContext(config=ireert.Config("local-sync"))
            # the module as vtmlir imports it (IREE 3.13 has no `linalg.add` in its parser)
            vmfb = ireec.compile_str(str(vtmlir.import_torch(Add(), x, y)), extra_args=flags)
            context.add_vm_module(ireert.VmModule.copy_buffer(context.instance, vmfb))
            function = context.modules.module["main"]
            calls["iree"] = lambda: function(xn, yn)
            calls["iree_to_host"] = lambda: _to_host(function(xn, yn))
        except Exception as err:  # noqa: BLE001 - an optional contender is a null line, not a crash
            missing.append(f"iree: {type(err).__name__}: {err}")
    if dvm:
        from vtmlir.dvm import Graph, compile_graph
        from vtmlir.dvm.native import native_vm
        from vtmlir.dvm.runner import DvmFunction
        from vtmlir.dvm.tiling import Target

        g = Graph("add")
        a, b = g.input(1), g.input(1)
        g.output(a + b)
        kernel = compile_graph(g, [(N,), (N,)])
        out = np.empty(N, np.float32)
        vm = native_vm()
        function = DvmFunction(vtmlir.import_torch(Add(), x, y), native=True, target=Target(cores=1))
        calls["dvm_kernel"] = lambda: kernel(xn, yn, native=True)
        calls["dvm_vm"] = lambda: vm.run_valid(kernel.bytecode, [xn, yn, out])
        calls["dvm_function"] = lambda: function(xn, yn)
    for name, call in calls.items():  # every contender computes the sum (and is warm)
        result = call()
        value = result[0] if isinstance(result, (list, tuple)) else result
        if name == "dvm_vm":
            value = out
        got = value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        if not np.allclose(got, expected):
            raise SystemExit(f"call_overhead: {name} computed {got}, expected {expected}")
    return calls, missing


def _to_host(result):
    """IREE's result(s) as numpy arrays (a list for a function of several results or one that
    returns a tuple; a device array unless the runtime already read it back)."""
    items = result if isinstance(result, (list, tuple)) else [result]
    return [r.to_host() if hasattr(r, "to_host") else np.asarray(r) for r in items]


def measure(calls: dict, samples: int, batch: int) -> dict[str, tuple[float, float]]:
    """name -> (median wall µs, median CPU µs) per call; samples interleaved round robin."""
    wall = {n: [] for n in calls}
    cpu = {n: [] for n in calls}
    for _ in range(samples):
        for name, call in calls.items():
            w0, p0 = time.perf_counter(), time.process_time()
            for _ in range(batch):
                call()
            wall[name].append((time.perf_counter() - w0) / batch * 1e6)
            cpu[name].append((time.process_time() - p0) / batch * 1e6)
    return {n: (statistics.median(wall[n]), statistics.median(cpu[n])) for n in calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=41)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--no-iree", action="store_true")
    parser.add_argument("--no-dvm", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    x, y = torch.randn(N), torch.randn(N)
    calls, missing = contenders(x, y, not args.no_iree, not args.no_dvm)
    results = measure(calls, args.samples, args.batch)
    eager_wall, eager_cpu = results["eager"]
    for name, (w, c) in results.items():
        emit(name, "wall_us", round(w, 3), "us", baseline=round(eager_wall, 3))
        emit(name, "cpu_us", round(c, 3), "us", baseline=round(eager_cpu, 3))
    for reason in missing:
        emit(reason.split(":")[0], "wall_us", None, "us", reason=reason)


if __name__ == "__main__":
    main()
