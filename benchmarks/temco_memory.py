"""TeMCO memory: internal-tensor peak of original / decomposed / Skip-Opt models, analysed and measured.

Per model: `temco-analyze-peak-memory`'s peak (§2.2 model: frees at last use, inputs and results
counted), the CPU runtime's measured internal peak (`track_memory=True`: everything the compiled
function mallocs, the caller's inputs/outputs apart), and the weight bytes, for the original model,
the Tucker-2 decomposed one (rank ratio 0.1) and the decomposed one after `temco-remat-skip`
(Skip-Opt, Alg. 1-2). Not yet the issue's 10-model suite: the zoo's conv models and two ResNet-style
models with Fig. 7 skip connections.

    python benchmarks/temco_memory.py [--batch N] [--models a,b]
"""

from __future__ import annotations

import argparse
import json

import torch

import vtmlir
from vtmlir.models import get
from vtmlir.temco import analyze_peak_memory, decompose_convs
from vtmlir.temco.measure import measure_peak_memory
from vtmlir.temco.remat import remat_skip_connections


class Fig7Block(torch.nn.Module):
    """TeMCO Fig. 7: b = relu(conv1(x)) is used by conv2 and by the add after conv3."""

    def __init__(self, c=32):
        super().__init__()
        self.conv1, self.conv2, self.conv3 = (torch.nn.Conv2d(c, c, 3, padding=1) for _ in range(3))

    def forward(self, x):
        b = torch.relu(self.conv1(x))
        return torch.relu(self.conv3(torch.relu(self.conv2(b))) + b)


class Fig7Net(torch.nn.Module):
    def __init__(self, c=32, blocks=3):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, c, 3, padding=1)
        self.blocks = torch.nn.Sequential(*(Fig7Block(c) for _ in range(blocks)))

    def forward(self, x):
        return self.blocks(torch.relu(self.stem(x)))


def _cases(batch):
    torch.manual_seed(0)
    yield "fig7_block", Fig7Block().eval(), (torch.randn(batch, 32, 16, 16),)
    yield "fig7_net", Fig7Net().eval(), (torch.randn(batch, 3, 16, 16),)
    for name in ("resnet_basic_block", "resnet_bottleneck_block", "conv_bn_relu_residual"):
        model, inputs = get(name).build(batch=batch)
        yield name, model, tuple(inputs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--models", default="")
    args = ap.parse_args(argv)
    wanted = set(filter(None, args.models.split(",")))
    for name, model, inputs in _cases(args.batch):
        if wanted and name not in wanted:
            continue
        original = vtmlir.import_torch(model, *inputs)
        decomposed = vtmlir.as_module(str(original))
        decompose_convs(decomposed, 0.1, True)
        remat = vtmlir.as_module(str(decomposed))
        (report,) = remat_skip_connections(remat)
        baseline = None
        for variant, module in (("original", original), ("decomposed", decomposed), ("skip_opt", remat)):
            timeline = analyze_peak_memory(module).function("main")
            _, stats = measure_peak_memory(str(module), *inputs)
            rows = {
                "analysed_peak": timeline.peak_bytes,
                "measured_internal_peak": stats.peak_internal_bytes,
                "weights": stats.weight_bytes,
            }
            if variant == "original":
                baseline = rows
            for metric, value in rows.items():
                print(json.dumps({"suite": "temco_memory", "case": f"{name}/b{args.batch}/{variant}", "metric": metric,
                                  "value": value, "unit": "bytes", "baseline": baseline[metric]}))
        print(json.dumps({"suite": "temco_memory", "case": f"{name}/b{args.batch}/skip_opt", "metric": "skips_rematerialized",
                          "value": len(report.rematerialized), "unit": "count", "baseline": len(report.skips)}))


if __name__ == "__main__":
    main()
