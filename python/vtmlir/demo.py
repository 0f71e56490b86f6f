"""The bundled demo (`vtmlir demo`): the foundation end to end on two real blocks.

For a Llama-style decoder layer (GQA, RMSNorm, rotary, KV-cache update) and a ResNet basic block,
both with random weights: compile for the CPU, run, compare with PyTorch eager; lower every kernel to
PTX and assemble it with ptxas; run on a GPU where one exists. Prints one summary table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

import vtmlir
from vtmlir.backend.cuda import assemble, cuda_available
from vtmlir.errors import VtmlirError

DEMO_MODELS = ("llama_decoder_layer", "resnet_basic_block")
TOLERANCE = 1e-4


@dataclass
class DemoRow:
    model: str
    cpu_compile_s: float = 0.0
    max_abs_err: float = float("nan")
    kernels: int = 0
    ptx_ok: dict[str, int] = field(default_factory=dict)
    gpu: str = "no GPU"
    ok: bool = False


def run_demo(models=DEMO_MODELS, archs=("sm_80", "sm_90"), console=None) -> list[DemoRow]:
    # deferred: torch (heavy) loads on first use
    import torch

    from vtmlir.models import get

    # Piped output (CI logs) gets a table wide enough to read, not rich's 80-column default.
    console = console or Console(width=None if Console().is_terminal else 120)
    rows = []
    for name in models:
        row = DemoRow(name)
        with console.status(f"[bold]{name}[/]: building and compiling for the CPU"):
            model, inputs = get(name).build(batch=1, seed=0)
            start = time.perf_counter()
            cpu = vtmlir.compile(model, *inputs, target="cpu")
            row.cpu_compile_s = time.perf_counter() - start
            got = _as_tuple(cpu(*inputs))
            with torch.no_grad():
                want = _as_tuple(model(*inputs))
            row.max_abs_err = max(float((g - w).abs().max()) for g, w in zip(got, want))
        with console.status(f"[bold]{name}[/]: lowering kernels to PTX and running ptxas"):
            cuda = vtmlir.compile(model, *inputs, target="cuda")
            row.kernels = len(cuda.kernels)
            for arch in archs:
                row.ptx_ok[arch] = sum(1 for kernel in cuda.kernels if _assembles(kernel, arch))
        if cuda_available():
            gpu_out = _as_tuple(cuda(*inputs))
            gpu_err = max(float((g.cpu() - w).abs().max()) for g, w in zip(gpu_out, want))
            row.gpu = f"max err {gpu_err:.1e}"
        row.ok = row.max_abs_err <= TOLERANCE and all(n == row.kernels for n in row.ptx_ok.values())
        rows.append(row)
    console.print(_table(rows, archs))
    return rows


def _assembles(kernel, arch) -> bool:
    try:
        assemble(kernel.ptx, arch, kernel.name)
        return True
    except VtmlirError:
        return False


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _table(rows, archs):
    table = Table(title="vtmlir demo: CPU numerics vs PyTorch, PTX per kernel")
    table.add_column("model", no_wrap=True)
    table.add_column("CPU compile", justify="right")
    table.add_column("max |err| vs torch", justify="right", no_wrap=True)
    table.add_column("kernels", justify="right")
    for arch in archs:
        table.add_column(f"ptxas {arch}", justify="right")
    table.add_column("GPU run")
    table.add_column("status")
    for r in rows:
        table.add_row(
            r.model,
            f"{r.cpu_compile_s:.1f} s",
            f"{r.max_abs_err:.1e}",
            str(r.kernels),
            *(f"{r.ptx_ok.get(a, 0)}/{r.kernels}" for a in archs),
            r.gpu,
            "[green]ok[/]" if r.ok else "[red]FAIL[/]",
        )
    return table
