"""`temco-remat-skip`: skip-connection optimisation of decomposed models (TeMCO §3.1, Algs. 1–2).

Song et al., ICPP'24 (TeMCO). A *skip connection* is an
internal tensor whose liveness spans many layers (Alg. 1 l. 17–19); in a decomposed model it is
usually computed from a *reduced* tensor (an lconv's input, R2 channels) by a few *restore layers*
(the lconv, then elementwise layers such as ReLU or BatchNorm). The pass keeps the reduced tensor
alive instead of the full-size one and re-executes the restore layers right before each far use
(Fig. 7: `a = conv1.lconv(a2); b = relu(a)` is cloned before `e`, which then reads `b'`).

On graph-level IR (linalg-on-tensors), per function, the top-level ops of the body in order are the
node list L (`arith.constant` and `tensor.empty` allocate nothing and are not nodes):

- Nodes are layers: ops computing from weights alone (bias broadcasts, init fills, BatchNorm's
  `1/sqrt(var+eps)`) are not nodes, so DISTANCE counts layers.
- **Liveness** (Alg. 1 l. 11–16): `begin` = position of the defining node, `end` = position of the
  last user; DISTANCE = `end - begin` (the same liveness as `temco-analyze-peak-memory`'s buffers).
- **Skip connections** (l. 18–19): tensor results with DISTANCE > `distance-threshold`; their *far
  uses* are the users more than `distance-threshold` nodes after `begin` (the restore layers are
  cloned before those only; near uses keep the original tensor).
- **FindReduced** (Alg. 2 l. 17–33): recursive over the defining ops' internal-tensor operands
  (PRED). A leaf is an lconv per IsLConv (l. 1–7): `linalg.conv_2d_nchw_fchw` with a 1×1 kernel,
  stride 1 and more output than input channels. Operands that are weights (`arith.constant`),
  `tensor.empty`, or computed from weights only (the bias broadcast an lconv accumulates into, init
  fills) are not PRED: they are re-materialised with the clone, which costs no internal memory that
  the original did not. A function argument, an op with regions other than a `linalg` op, or
  recursion deeper than `max-depth` ends the search: that skip connection is left alone.
- **Compare / ORDER** (l. 8–9, 28): predecessors are ordered so that `a` goes before `b` when
  `a.size + b.peak < b.size + a.peak`; **Peak** (l. 10–16) is the peak of running them in that order.
- **Overhead** (Alg. 1 l. 1–9): copy only if the FLOPs of the restore layers are at most the
  threshold and their peak is at most `peak-ratio` × (SIZE(n) + Σ SIZE(PRED(n))). The paper sets the
  FLOPs threshold to "the FLOPs of the corresponding parts of the original model without
  decomposition"; with `flops-threshold=0` (default) that is the sum, over the lconvs in the list, of
  the original conv's FLOPs, rebuilt from the `temco.layer`'s fconv/core/lconv shapes (2·N·F·H'·W'·C·kh·kw);
  an lconv without `temco.*` attributes counts its own FLOPs. A positive value is an absolute bound.
- **Insertion** (l. 22–23): the list is cloned (with its weight-only operands) before each far use,
  which then reads the clone; originals left without users are erased.

Liveness is computed once, before any rewrite, as in Alg. 1. The report lists every skip connection
found, its restore list, the overhead numbers and the decision.
"""

from __future__ import annotations

import functools
import json as _json
from dataclasses import dataclass, field

from torch_mlir import ir

from ..ir_utils import walk_ops
from ..passes.registry import Option, Pass, register_pass, report_option
from ..errors import format_location
from ..ir_types import shaped_bytes

_NOT_NODES = {"arith.constant", "tensor.empty"}
_CONV = "linalg.conv_2d_nchw_fchw"
# Ops that reshape a weight without computing (BatchNorm's parameters are expanded to [C,1,1]).
_WEIGHT_VIEWS = {"tensor.expand_shape", "tensor.collapse_shape", "tensor.cast", "tensor.extract_slice"}


@dataclass
class Restore:
    """FindReduced's result (Alg. 2 `res`): restore layers in order, SIZE of the result, their peak."""

    ops: list  # ir.Operation, in execution order; the last one defines the restored tensor
    size: int
    peak: int


@dataclass
class SkipConnection:
    name: str
    location: str
    bytes: int
    begin: int
    end: int
    far_uses: int
    restore: list[str] = field(default_factory=list)  # op names of the restore list
    reduced_bytes: int = 0  # bytes of the reduced tensors the clones read instead
    flops: int = 0
    flops_threshold: int = 0
    peak: int = 0
    peak_limit: int = 0
    decision: str = ""  # "rematerialized" or why not

    @property
    def distance(self) -> int:
        return self.end - self.begin


@dataclass
class RematReport:
    function: str
    skips: list[SkipConnection] = field(default_factory=list)

    @property
    def rematerialized(self) -> list[SkipConnection]:
        return [s for s in self.skips if s.decision == "rematerialized"]

    def to_dict(self) -> dict:
        return {"function": self.function,
                "skips": [dict(vars(s), distance=s.distance) for s in self.skips]}

    def to_text(self) -> str:
        lines = [f"temco-remat-skip @{self.function}: {len(self.skips)} skip connection(s), "
                 f"{len(self.rematerialized)} rematerialized"]
        for s in self.skips:
            lines.append(
                f"  {s.name} ({s.bytes} B, live {s.begin}..{s.end}, distance {s.distance}, {s.far_uses} far use(s)) "
                f"at {s.location}: {s.decision}")
            if s.restore:
                lines.append(f"    restore: {' -> '.join(s.restore)}; reduced tensors {s.reduced_bytes} B; "
                             f"FLOPs {s.flops} (threshold {s.flops_threshold}); peak {s.peak} B (limit {s.peak_limit} B)")
        return "\n".join(lines) + "\n"


# -- shapes, sizes, FLOPs --------------------------------------------------------------------------


def _size(value) -> int:
    return shaped_bytes(value.type) or 0


def _shape(value) -> list[int]:
    return list(ir.ShapedType(value.type).shape)


def _numel(value) -> int:
    n = 1
    for d in _shape(value):
        n *= d
    return n


def _int_attr(op, name, default=None):
    return ir.IntegerAttr(op.attributes[name]).value if name in op.attributes else default


def _strides_one(op) -> bool:
    if "strides" not in op.attributes:
        return True
    return all(int(s) == 1 for s in ir.DenseIntElementsAttr(op.attributes["strides"]))


def is_lconv(op) -> bool:
    """Alg. 2 IsLConv: a conv with 1×1 kernel and stride 1 that increases the channel count."""
    if op.name != _CONV:
        return False
    inp, weight = op.operands[0], op.operands[1]
    f, c, kh, kw = _shape(weight)
    return (kh, kw) == (1, 1) and _strides_one(op) and f > _shape(inp)[1] and c == _shape(inp)[1]


def flops(op) -> int:
    """FLOPS(v) of Alg. 1: 2·MACs for convs and matmuls, one per output element otherwise."""
    if op.name == _CONV:
        _, c, kh, kw = _shape(op.operands[1])
        return 2 * _numel(op.results[0]) * c * kh * kw
    if op.name in ("linalg.matmul", "linalg.batch_matmul"):
        return 2 * _numel(op.results[0]) * _shape(op.operands[0])[-1]
    return sum(_numel(r) for r in op.results if _is_tensor(r))


def _is_tensor(value) -> bool:
    return isinstance(value.type.maybe_downcast() if hasattr(value.type, "maybe_downcast") else value.type,
                      ir.RankedTensorType)


# -- the algorithm ---------------------------------------------------------------------------------


class _FunctionRemat:
    def __init__(self, func, distance_threshold, flops_threshold, peak_ratio, max_depth):
        self.func = func
        self.distance_threshold = distance_threshold
        self.flops_threshold = flops_threshold
        self.peak_ratio = peak_ratio
        self.max_depth = max_depth
        self.block = func.regions[0].blocks[0]
        self.ops = [o.operation for o in self.block.operations]
        # Layers only: ops computing from weights alone (bias broadcasts, init fills) are not nodes.
        self.nodes = [o for o in self.ops if o.name not in _NOT_NODES and o.name != "func.return"
                      and any(_is_tensor(r) for r in o.results)
                      and not all(self.weight_only(r) for r in o.results if _is_tensor(r))]
        self.nodes.append(self.ops[-1])  # func.return is the last node (results live through it)
        # Positions keyed by result values (ir.Value hashes are stable; ir.Operation's are not).
        self.position_of_value = {}
        for i, op in enumerate(self.nodes):
            for r in op.results:
                self.position_of_value[r] = i
        self.layer_flops = self._original_layer_flops()
        self.failure = ""

    # Alg. 1 l. 11-16: liveness.
    def users(self, value):
        """Top-level node indices that use `value` (a use inside a region counts at its top op)."""
        found = set()
        for use in value.uses:
            owner = use.owner
            op = owner.operation if hasattr(owner, "operation") else owner
            while op is not None and op.parent is not None and op.parent.name != "func.func":
                op = op.parent
            for i, node in enumerate(self.nodes):
                if node == op:
                    found.add(i)
                    break
        return sorted(found)

    def weight_only(self, value, depth=0) -> bool:
        """Computed from constants and tensor.empty only (bias broadcasts, init fills)."""
        if isinstance(value.owner, ir.Block) or depth > 8:
            return False
        op = value.owner.operation if hasattr(value.owner, "operation") else value.owner
        if op.name in _NOT_NODES:
            return True
        if op.name == _CONV or not (op.name.startswith("linalg.") or op.name in _WEIGHT_VIEWS):
            return False
        return all(self.weight_only(v, depth + 1) for v in op.operands if _is_tensor(v))

    def preds(self, op) -> list:
        """PRED: internal-tensor operands that are neither weights nor computed from weights only."""
        return [v for v in op.operands if _is_tensor(v) and not self.weight_only(v)]

    def find_reduced(self, value, depth=0) -> Restore | None:
        """Alg. 2 FindReduced(v); None where no restore list exists."""
        if isinstance(value.owner, ir.Block):
            self.failure = "reaches a function argument"
            return None
        if depth > self.max_depth:
            self.failure = f"deeper than max-depth={self.max_depth}"
            return None
        op = value.owner.operation if hasattr(value.owner, "operation") else value.owner
        if is_lconv(op):
            return Restore([op], _size(value), _size(value) + _size(op.operands[0]))
        if not op.name.startswith("linalg.") or len(op.results) != 1:
            self.failure = f"reaches '{op.name}', not a restorable layer"
            return None
        pred_list = []
        for p in self.preds(op):
            found = self.find_reduced(p, depth + 1)
            if found is None:
                return None
            pred_list.append(found)

        def compare(a, b):  # Alg. 2 l. 8-9: a before b when a.size + b.peak < b.size + a.peak
            if a.size + b.peak < b.size + a.peak:
                return -1
            return 1 if b.size + a.peak < a.size + b.peak else 0

        ordered = sorted(pred_list, key=functools.cmp_to_key(compare))
        ops = []
        for e in ordered:
            ops.extend(o for o in e.ops if not any(o == seen for seen in ops))
        ops.append(op)
        return Restore(ops, _size(value), _peak(ordered, _size(value)))

    def _original_layer_flops(self) -> dict[int, int]:
        """FLOPs of each decomposed conv before decomposition, from its fconv/core/lconv shapes."""
        parts: dict[int, dict[str, ir.Operation]] = {}
        for op in walk_ops(self.func, _CONV):
            if "temco.layer" in op.attributes and "temco.role" in op.attributes:
                parts.setdefault(_int_attr(op, "temco.layer"), {})[ir.StringAttr(op.attributes["temco.role"]).value] = op
        out = {}
        for layer, p in parts.items():
            if {"fconv", "core", "lconv"} <= set(p):
                c = _shape(p["fconv"].operands[1])[1]
                _, _, kh, kw = _shape(p["core"].operands[1])
                out[layer] = 2 * _numel(p["lconv"].results[0]) * c * kh * kw
        return out

    def threshold_for(self, restore: Restore) -> int:
        if self.flops_threshold > 0:
            return int(self.flops_threshold)
        total = 0
        for op in restore.ops:
            if is_lconv(op):
                layer = _int_attr(op, "temco.layer")
                total += self.layer_flops.get(layer, flops(op)) if layer is not None else flops(op)
        return total

    def run(self) -> RematReport:
        name = ir.StringAttr(self.func.attributes["sym_name"]).value
        report = RematReport(name)
        # Alg. 1 l. 11-16, computed once before any rewrite.
        live = []
        for i, node in enumerate(self.nodes[:-1]):
            for r in node.results:
                if not _is_tensor(r) or self.weight_only(r):
                    continue
                users = self.users(r)
                if users:
                    live.append((r, i, max(users), users))
        rewritten = []  # restore lists that were cloned: their originals may now be dead
        for value, begin, end, users in live:
            if end - begin <= self.distance_threshold:  # Alg. 1 l. 18-19
                continue
            far = [u for u in users if u - begin > self.distance_threshold]
            node = self.nodes[begin]
            skip = SkipConnection(name=value.get_name(), location=format_location(node.location), bytes=_size(value),
                                  begin=begin, end=end, far_uses=len(far))
            report.skips.append(skip)
            restore = self.find_reduced(value)  # Alg. 1 l. 20
            if restore is None:
                skip.decision = f"kept: FindReduced failed ({self.failure})"
                continue
            skip.restore = [o.name for o in restore.ops]
            skip.reduced_bytes = sum(_size(o.operands[0]) for o in restore.ops if is_lconv(o))
            skip.flops = sum(flops(o) for o in restore.ops)
            skip.flops_threshold = self.threshold_for(restore)
            skip.peak = restore.peak
            skip.peak_limit = int(self.peak_ratio * (_size(value) + sum(_size(p) for p in self.preds(node))))
            # Alg. 1 l. 1-9: Overhead.
            if skip.flops > skip.flops_threshold:
                skip.decision = "kept: restore FLOPs above the threshold"
                continue
            if skip.peak > skip.peak_limit:
                skip.decision = "kept: restore peak above the limit"
                continue
            for u in far:  # Alg. 1 l. 22-23
                self._clone_before(restore.ops, value, self.nodes[u])
            rewritten.extend(restore.ops)
            skip.decision = "rematerialized"
        self._erase_dead(rewritten)
        return report

    def _erase_dead(self, ops) -> None:
        """Erase originals of cloned restore layers left without users, and then their weight-only
        producers (bias broadcasts, fills) left without users; nothing else is touched."""
        candidates = list(ops)
        changed = True
        while changed:
            changed = False
            for op in list(reversed(candidates)):
                if op.results and all(len(list(r.uses)) == 0 for r in op.results):
                    producers = [v.owner.operation if hasattr(v.owner, "operation") else v.owner
                                 for v in op.operands
                                 if not isinstance(v.owner, ir.Block) and _is_tensor(v) and self.weight_only(v)]
                    candidates = [c for c in candidates if c != op]
                    op.erase()
                    candidates.extend(p for p in producers if p.name not in _NOT_NODES
                                      and not any(p == c for c in candidates))
                    changed = True
                    break

    def _clone_before(self, ops, value, use_op) -> None:
        mapping: dict = {}
        ip = ir.InsertionPoint(use_op)

        def materialize(v):
            if v in mapping:
                return mapping[v]
            if isinstance(v.owner, ir.Block):
                return v
            owner = v.owner.operation if hasattr(v.owner, "operation") else v.owner
            if owner.name in _NOT_NODES or not self.weight_only(v):
                return v
            # A weight-only producer (bias broadcast, init fill): recompute it here as well, so the
            # clone does not keep the original's full-size buffer alive.
            clone(owner)
            return mapping[v]

        def clone(op):
            new_operands = [materialize(v) for v in op.operands]
            new = op.clone(ip)
            for i, v in enumerate(new_operands):
                if v != op.operands[i]:
                    new.operands[i] = v
            for old, res in zip(op.results, new.results):
                mapping[old] = res

        for op in ops:
            clone(op)
        restored = mapping[value]
        for i, v in enumerate(use_op.operands):
            if v == value:
                use_op.operands[i] = restored


def _peak(ordered: list[Restore], size_v: int) -> int:
    """Alg. 2 Peak(l, v)."""
    peak = resided = 0
    for e in ordered:
        peak = max(resided + e.peak, peak)
        resided += e.size
    return max(resided + size_v, peak)


def remat_skip_connections(module, distance_threshold: int = 5, flops_threshold: float = 0.0,
                           peak_ratio: float = 1.0, max_depth: int = 8) -> list[RematReport]:
    """Apply Alg. 1 to every function of `module` in place; one report per function."""
    target = module.operation if hasattr(module, "operation") else module
    reports = []
    for func in walk_ops(target, "func.func"):
        if not func.regions[0].blocks or len(func.regions[0].blocks) != 1:
            continue
        reports.append(_FunctionRemat(func, distance_threshold, flops_threshold, peak_ratio, max_depth).run())
    return reports


@register_pass
class TemcoRematSkip(Pass):
    name = "temco-remat-skip"
    summary = "Replace skip connections by reduced tensors and clone their restore layers (TeMCO Algs. 1-2)"
    description = (
        "TeMCO (ICPP'24) §3.1: finds internal tensors live longer than distance-threshold nodes, walks back "
        "through elementwise layers to lconvs (FindReduced, IsLConv), orders restore layers by Compare, "
        "checks the Overhead (FLOPs and peak) and clones the restore layers before each far use."
    )
    options = (
        Option("distance-threshold", int, 5, "DISTANCE_THRESHOLD: a tensor live for more nodes than this is a skip connection"),
        Option("flops-threshold", float, 0.0, "COMPUTE_THRESHOLD in FLOPs; 0: the FLOPs of the original (undecomposed) convs restored"),
        Option("peak-ratio", float, 1.0, "copy only if the restore peak is at most this times SIZE(n) + sum SIZE(PRED(n))"),
        Option("max-depth", int, 8, "deepest FindReduced recursion"),
        Option("json", bool, False, "print the report as JSON"),
        report_option("one line per rematerialised skip"),
    )

    def run(self, module):
        if self.distance_threshold < 0 or self.peak_ratio <= 0 or self.flops_threshold < 0:
            self.emit_error(module, f"{self.name}: distance-threshold and flops-threshold must be >= 0, peak-ratio > 0")
            return
        reports = remat_skip_connections(module, self.distance_threshold, self.flops_threshold,
                                         self.peak_ratio, self.max_depth)
        text = (_json.dumps([r.to_dict() for r in reports], indent=2) + "\n" if self.json
                else "".join(r.to_text() for r in reports))
        self.write_report(module, text)
        return reports
