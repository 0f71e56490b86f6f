"""`temco-fuse-activation`: lconv → activation (→ pooling) → fconv as one tiled loop (TeMCO §3.2, §3.3).

Song et al., ICPP'24 (TeMCO). In a decomposed model the
full-size tensors live between an lconv (1×1, R2 → F channels) and the next fconv (1×1, F → R1): the
lconv's output, the activation's output, the pooling's output (Fig. 3b Output1/Input2). §3.2 fuses
the sequence into one kernel that computes, per spatial tile, the lconv over all F channels, the
activation (and pooling), and the fconv's contribution, keeping only a tile of the F-channel
intermediate (Listing 1: parallel over H and W, all channels of a pixel in one tile).

At graph level this is upstream tile-and-fuse, driven through the transform dialect:

1. **Groups.** For every 1×1, stride-1 `linalg.conv_2d_nchw_fchw` (the fconv), walk back from its
   input through *fusible* producers — elementwise `linalg.generic`s (all iterators parallel: ReLU,
   SiLU's sigmoid and mul, GELU, BatchNorm's affine ops, an add of a skip tensor) and, with
   `fuse-pooling`, `linalg.pooling_nchw_max/sum` — to lconvs (1×1, stride 1 convs: the leaves; any
   number, so `relu(lconv_a(x) + lconv_b(y))` fuses both). Every intermediate result must be used
   only inside the group (else it is needed full-size anyway and that producer is left out, with
   everything only it reaches). Tensors entering from outside (a skip connection read by an add,
   BatchNorm constants) are read tile by tile.
2. **Tiling.** The fconv is tiled with `transform.structured.tile_using_forall` over (N, H, W) with
   tile `[1, all channels, 1, tile-width]` (`tile-width` is rounded down to a divisor of W so every
   tile is static): one `scf.forall` per group, parallel like Listing 1's grid.
3. **Fusion.** The group's ops, then the inits they accumulate into when those are computed from
   weights only (the lconv's bias broadcast, the pooling's -inf fill), are fused into the loop in
   reverse program order with `transform.structured.fuse_into_containing_op` (consumers first; a
   producer with other users is cloned); `fold_tensor_empty` shrinks the slices of `tensor.empty`
   to tile-sized empties, and CSE inside the loops merges the copies of a producer fused once per
   use (SiLU reads the lconv tile twice). After bufferization only tile-sized buffers exist inside
   the loop.

The loop is marked `temco.fused = "lconv-act-fconv"` (or `"lconv-act-pool-fconv"`). Code generation:
the CPU lowering turns `scf.forall` into `scf.for` (`scf-forall-to-for`); the CUDA lowering
(`gpu-sequentialize-forall`, `passes/gpu_sequentialize_forall.py`) makes each tile one GPU thread with its tile
buffer in local memory (`memref.alloca`) and the loop the kernel's grid, so the group is one kernel.

Layer transformations (§3.3, Fig. 9): with `split-concat` (default on), an fconv whose input is a
channel `tensor.concat` of tensors produced by fusible chains is rewritten into a chain of 1×1
convs accumulating into one output, each reading one part with its slice of the weights (Fig. 9b →
9c): `W·concat(a, b) = W[:, :C]·a + W[:, C:]·b`; each conv-add then forms its own group.
"""

from __future__ import annotations

import functools
import math
import json as _json
from dataclasses import asdict, dataclass, field

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import func as func_d, linalg
from torch_mlir.dialects import transform
from torch_mlir.dialects.transform import structured
from torch_mlir.dialects.transform import tensor as transform_tensor

from ..ir_constants import constant_array, make_constant
from ..ir_utils import apply_transform_script, walk_ops
from ..passes.registry import Option, Pass, PassFailure, register_pass, report_option
from ..errors import VtmlirError, format_location
from ..ir_types import shaped_bytes
from .gather_to_affine import gather_to_affine
from .merge_lconvs import fill_conv_body, merge_lconvs as _merge_lconvs
from .pad_in_place import pad_in_place, pad_value
from .push_through_concat import push_through_concat

_CONV = "linalg.conv_2d_nchw_fchw"
_POOLS = {"linalg.pooling_nchw_max", "linalg.pooling_nchw_sum"}
_INIT_PRODUCERS = {"linalg.fill", "linalg.broadcast", "linalg.generic"}
_ATTR = "temco.fuse"
WHERE = ("all", "peak")


@dataclass
class FusedGroup:
    """One fused lconv–activation–fconv sequence."""

    fconv: str  # location of the fconv
    lconvs: list[str]
    ops: list[str]  # names of the fused ops, program order (lconvs, activations, pooling)
    tile: list[int]  # tile of the fconv's output [1, R1, 1, tw]
    avoided_bytes: int  # bytes of the full-size intermediates no longer allocated
    pooling: bool = False
    kind: str = "lconv-act-fconv"  # "lconv-act": an elementwise root whose output stays full-size;
    # "lconv-act-pool": a padded pooling root (channel tiles)
    in_place: bool = False  # the root overwrites a tensor that dies in the group (ResNet's skip)
    complete: bool = True  # False: upstream fusion stopped early, some members stay outside the loop


@dataclass
class FusionReport:
    function: str
    groups: list[FusedGroup] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # fconv location: reason
    concat_splits: int = 0
    concat_pushes: int = 0  # elementwise ops moved from a concat to its parts (temco-push-through-concat)
    affine_gathers: int = 0  # gathers read through an affine map (temco-gather-to-affine)
    lconv_merges: int = 0  # runs of concatenated lconvs merged (temco-merge-lconvs, Fig. 9a)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_text(self) -> str:
        lines = [f"temco-fuse-activation @{self.function}: {len(self.groups)} fused group(s), "
                 f"{self.concat_splits} concat split(s)"]
        for g in self.groups:
            root = {"lconv-act-fconv": "fconv", "lconv-act-pool": "pooling root"}.get(g.kind, "elementwise root")
            lines.append(f"  fused {' -> '.join(g.ops)} -> {root} at {g.fconv}"
                         f"{' (in place)' if g.in_place else ''}: tile {g.tile}, "
                         f"full-size intermediates avoided {g.avoided_bytes} B")
        for s in self.skipped:
            lines.append(f"  not fused: {s}")
        return "\n".join(lines) + "\n"


# -- shapes and classification ---------------------------------------------------------------------


def _shape(value) -> list[int]:
    return list(ir.ShapedType(value.type).shape)


def _is_static_tensor(value) -> bool:
    t = value.type.maybe_downcast() if hasattr(value.type, "maybe_downcast") else value.type
    return isinstance(t, ir.RankedTensorType) and ir.ShapedType(t).has_static_shape


def _is_pointwise_conv(op) -> bool:
    """A 1×1, stride-1 `linalg.conv_2d_nchw_fchw` on static tensors (Alg. 2's IsLConv/IsFConv shape)."""
    if op.name != _CONV or not all(_is_static_tensor(v) for v in list(op.operands) + list(op.results)):
        return False
    kh, kw = _shape(op.operands[1])[2:]
    strides = [int(s) for s in ir.DenseIntElementsAttr(op.attributes["strides"])] if "strides" in op.attributes else [1, 1]
    return (kh, kw) == (1, 1) and strides == [1, 1]


def _role(op) -> str:
    """The `temco.role` of a decomposed conv ("fconv", "core", "lconv"), "" for other ops."""
    return ir.StringAttr(op.attributes["temco.role"]).value if "temco.role" in op.attributes else ""


def _is_elementwise(op) -> bool:
    """A one-result `linalg.generic` with only parallel iterators on a rank-4 static tensor."""
    if op.name != "linalg.generic" or len(op.results) != 1 or not _is_static_tensor(op.results[0]):
        return False
    iterators = [str(a) for a in ir.ArrayAttr(op.attributes["iterator_types"])]
    return len(_shape(op.results[0])) == 4 and all("parallel" in it for it in iterators)


def _num_inputs(op) -> int:
    seg = op.attributes["operandSegmentSizes"] if "operandSegmentSizes" in op.attributes else None
    return int(ir.DenseI32ArrayAttr(seg)[0]) if seg is not None else len(op.operands) - len(op.results)


def _producer(value):
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation if hasattr(owner, "operation") else owner


def _key(op):
    """An op's identity as a dict key: the `ir.Operation` itself, which compares by identity. (Its
    hash is of the op's content and location: identical ops share it, so a hash is no key.)"""
    return op.operation if hasattr(op, "operation") else op


# -- group discovery -------------------------------------------------------------------------------


class _GroupFinder:
    """Step 1 of the module docstring: the fusible ops feeding one fconv."""

    def __init__(self, fconv, fuse_pooling: bool, channel_tiles: bool = False, tile_width: int = 0):
        self.tile_width = tile_width  # of the root's output tile (spatial tiles), for the core decision
        self.fconv = fconv  # the root: a 1x1 fconv, or an elementwise/pooling op whose result stays full-size
        self.fuse_pooling = fuse_pooling
        # tiles over (N, C) with whole feature maps: padded tensors fuse (static tiles), and a conv
        # is a leaf (a channel tile of its output needs all its input channels)
        self.channel_tiles = channel_tiles

    def _fusible(self, op) -> bool:
        return op is not None and (
            _is_pointwise_conv(op) or _is_elementwise(op)
            or (self.fuse_pooling and op.name in _POOLS and _is_static_tensor(op.results[0]))
            or (self.channel_tiles and _is_spatial_constant_pad(op)))

    def _add_core_convs(self, members: dict) -> None:
        """A core conv (any kernel and stride) feeding a 1x1 member joins a spatially tiled group as a
        leaf, reading its input (the padded reduced tensor) tile by tile, when that lowers the local
        peak. Unfused, its output `c` is live with its input `p`, then with the group's output `o`
        and tiles `t`: max(p + c, c + o + t); fused, p + o + t + the core's tile. VGG-11's first
        conv (followed by pooling: o is small) gains; VGG-16's first block (p = o) and AlexNet's
        first conv (t eats the gain) keep the core outside."""
        if self.channel_tiles or self.tile_width <= 0:
            return
        extents = _tile_extents(self.fconv, members, self.tile_width)
        tiles = sum(_extent_bytes(op, extents.get(k)) for k, op in members.items())
        out = _output_bytes(self.fconv)
        for k, op in list(members.items()):
            core = _producer(op.operands[0]) if _is_pointwise_conv(op) else None
            if (core is None or core.name != _CONV or _is_pointwise_conv(core) or _key(core) in members
                    or not all(_is_static_tensor(v) for v in list(core.operands) + list(core.results))
                    or any(_key(u.owner) != k for u in core.results[0].uses)):
                continue
            p, c = shaped_bytes(core.operands[0].type) or 0, shaped_bytes(core.results[0].type) or 0
            core_tile = _extent_bytes(core, extents.get(k))
            if p + out + tiles + core_tile < max(p + c, c + out + tiles):
                members[_key(core)] = core

    def _collect(self, banned: set[int]) -> dict[int, object]:
        members: dict[int, object] = {}
        pending = _rank4_inputs(self.fconv)
        if self.fconv.name == _CONV:
            # the root's own init is the loop's shared output, not a tile read: not fusible
            pending = pending[:1]
        while pending:
            producer = _producer(pending.pop())
            if not self._fusible(producer) or _key(producer) in banned or _key(producer) in members:
                continue
            members[_key(producer)] = producer
            if producer.name == _CONV:
                # the accumulation chain of a split concat (the conv's init) belongs to the group, and
                # so does what computes the conv's input when that is fusible too (a split part's
                # BatchNorm/ReLU and the lconv before it): a 1x1 conv reads its output tile's pixels
                # only. An lconv's input is the core conv's output, which ends the walk.
                pending.extend(_conv_chain_init(producer))
                if not self.channel_tiles:
                    pending.append(producer.operands[0])
                continue
            if producer.name == "tensor.pad":
                pending.append(producer.operands[0])
                continue
            pending.extend(_rank4_inputs(producer))
        return members

    def find(self):
        """Members in program order, or (None, reason)."""
        banned: set[int] = set()
        while True:
            members = self._collect(banned)
            allowed = set(members) | {_key(self.fconv)}
            bad = [k for k, op in members.items()
                   if any(_key(use.owner) not in allowed for r in op.results for use in r.uses)]
            if not bad:
                break
            banned.update(bad)
        if not any(op.name == _CONV for op in members.values()):
            return None, "no lconv reaches its input through fusible single-use ops"
        self._add_core_convs(members)
        if _is_elementwise(self.fconv) and not any(_shape(op.results[0]) == _shape(self.fconv.results[0])
                                                for op in members.values()):
            return None, "no full-size intermediate"
        ordered = sorted(members.values(), key=_program_position)
        return ordered, ""


def _rank4_inputs(op) -> list:
    return [v for v in list(op.operands)[:_num_inputs(op)] if _is_static_tensor(v) and len(_shape(v)) == 4]


def _conv_chain_init(conv) -> list:
    """The init of a 1x1 conv when another 1x1 conv computes it (the accumulation chain of a split
    concat, Fig. 9c): `[init]` to walk into, else []."""
    init = conv.operands[2]
    producer = _producer(init)
    return [init] if producer is not None and _is_pointwise_conv(producer) else []


def _tile_rows(members, height: int) -> int:
    """Rows per tile: 1, or the row factor q of an upsampling member (an operand read through
    `d2 floordiv q`, `temco-gather-to-affine`), so that a tile reads whole source rows and the chain
    before the upsampling is not computed q times (UNet's decoder)."""
    rows = 1
    for op in members:
        if op.name != "linalg.generic":
            continue
        for amap in ir.ArrayAttr(op.attributes["indexing_maps"]):
            results = ir.AffineMapAttr(amap).value.results
            if (len(results) == 4 and isinstance(results[2], ir.AffineFloorDivExpr)
                    and isinstance(results[2].rhs, ir.AffineConstantExpr)):
                q = results[2].rhs.value
                rows = rows * q // math.gcd(rows, q)
    return rows if height % rows == 0 else 1


def _window(op) -> tuple[int, int, int, int, int, int]:
    """(kh, kw, sh, sw, dh, dw) of a conv or pooling op."""
    kh, kw = (_shape(op.operands[1])[2:] if op.name == _CONV else _shape(op.operands[1]))
    sh, sw = [int(v) for v in ir.DenseIntElementsAttr(op.attributes["strides"])] if "strides" in op.attributes else [1, 1]
    dh, dw = [int(v) for v in ir.DenseIntElementsAttr(op.attributes["dilations"])] if "dilations" in op.attributes else [1, 1]
    return kh, kw, sh, sw, dh, dw


def _tile_extents(root, members: dict, tile_width: int) -> dict:
    """Rows and columns of each member's tile when the root's output is tiled [1, C, 1, tile_width]:
    windows (pooling, core convs) widen the tile, 1x1 convs and elementwise ops keep it, an operand
    read through `floordiv q` (upsampling) shrinks it. An estimate for the core-conv decision."""
    extents = {_key(root): (1, tile_width)}
    for op in [root] + sorted(members.values(), key=_program_position, reverse=True):
        if _key(op) not in extents:
            continue
        rows, cols = extents[_key(op)]
        out_h, out_w = _shape(op.results[0])[2:]
        for value in list(op.operands)[:_num_inputs(op)] + (list(op.operands)[2:3] if op.name == _CONV else []):
            producer = _producer(value)
            if producer is None or _key(producer) not in members or len(_shape(value)) != 4:
                continue
            in_h, in_w = _shape(value)[2:]
            if op.name in _POOLS or (op.name == _CONV and not _is_pointwise_conv(op) and value == op.operands[0]):
                kh, kw, sh, sw, dh, dw = _window(op)
                need = ((rows - 1) * sh + (kh - 1) * dh + 1, (cols - 1) * sw + (kw - 1) * dw + 1)
            elif (in_h, in_w) != (out_h, out_w):
                need = (-(-rows * in_h // out_h) + 1, -(-cols * in_w // out_w) + 1)
            else:
                need = (rows, cols)
            old = extents.get(_key(producer), (0, 0))
            extents[_key(producer)] = (min(in_h, max(old[0], need[0])), min(in_w, max(old[1], need[1])))
    return extents


def _extent_bytes(op, extent) -> int:
    if extent is None:
        return 0
    c = _shape(op.results[0])[1]
    element = (shaped_bytes(op.results[0].type) or 0) // max(1, int(np.prod(_shape(op.results[0]))))
    return c * extent[0] * extent[1] * element


def _output_bytes(root) -> int:
    """Bytes the root's result occupies: its padded copy's when a constant pad is its only user
    (`temco-pad-in-place` then makes the root write into that buffer)."""
    users = [u.owner for u in root.results[0].uses]
    if len(users) == 1 and users[0].operation.name == "tensor.pad" and pad_value(users[0].operation) is not None:
        return shaped_bytes(users[0].operation.results[0].type) or 0
    return shaped_bytes(root.results[0].type) or 0


def _is_spatial_constant_pad(op) -> bool:
    """A static `tensor.pad` of a rank-4 NCHW tensor with one value everywhere (max-pool's -inf, a
    zero pad) that pads H and W only: a channel tile of it is a padded channel tile of its source."""
    if op.name != "tensor.pad" or len(op.operands) != 1 or not _is_static_tensor(op.operands[0]) \
            or len(_shape(op.operands[0])) != 4 or pad_value(op) is None:
        return False
    low = list(ir.DenseI64ArrayAttr(op.attributes["static_low"]))
    high = list(ir.DenseI64ArrayAttr(op.attributes["static_high"]))
    return low[:2] == [0, 0] and high[:2] == [0, 0]


def _is_pooling_root(op) -> bool:
    """A pooling op whose result must exist full-size (DenseNet's and ResNet-50's stem max-pool: the
    block input, read by several layers) and whose input is padded: it roots a channel-tiled group
    (lconv -> BatchNorm -> ReLU -> pad -> max-pool per channel tile), so neither the activation nor
    its padded copy is ever full-size. Unpadded pools are fused spatially with their consumer."""
    if op.name not in _POOLS or not _is_static_tensor(op.results[0]):
        return False
    producer = _producer(op.operands[0])
    return producer is not None and _is_spatial_constant_pad(producer) and _needs_full_size(op)


def _needs_full_size(op) -> bool:
    users = {_key(u.owner): u.owner for u in op.results[0].uses}
    if len(users) != 1:
        return True
    (user,) = users.values()
    user = user.operation if hasattr(user, "operation") else user
    return not (_is_pointwise_conv(user) or _is_elementwise(user) or user.name in _POOLS)


def _is_elementwise_root(op) -> bool:
    """An elementwise op whose result must exist full-size: used by several ops, by a non-fusible
    op, or returned (the block output of a ResNet: the next block's fconv input and its skip)."""
    if not _is_elementwise(op) or _shape(op.results[0])[2] * _shape(op.results[0])[3] == 1:
        return False  # a 1x1 feature map has nothing to tile (and nothing worth saving)
    return _needs_full_size(op)


def _in_place_destination(root, members):
    """A tensor the root can overwrite tile by tile (TeMCO keeps one full-size tensor per block):
    an operand of the group of the root's type, produced by an op (not an argument, weight or view)
    and not read after the root."""
    if root.name != "linalg.generic":
        return None
    n_in = _num_inputs(root)
    init_arg = root.regions[0].blocks[0].arguments[n_in]
    if any(True for _ in init_arg.uses) or _producer(root.operands[n_in]) is None \
            or _producer(root.operands[n_in]).name != "tensor.empty":
        return None
    group = {_key(m) for m in members} | {_key(root)}
    for op in list(members) + [root]:
        for value in list(op.operands)[:_num_inputs(op)]:
            producer = _producer(value)
            if (producer is None or _key(producer) in group or value.type != root.results[0].type
                    or producer.name in ("arith.constant", "tensor.expand_shape", "tensor.collapse_shape",
                                         "tensor.extract_slice", "tensor.cast", "tensor.empty")):
                continue
            # every other reader runs before the root (the block's fconv reads the skip first)
            if all(_key(use.owner) in group or _before(use.owner, root) for use in value.uses):
                return value
    return None


def _before(op, other) -> bool:
    op = op.operation if hasattr(op, "operation") else op
    return op.parent == other.parent and op.is_before_in_block(other)


def _program_position(op) -> int:
    block = op.operation.block
    for i, other in enumerate(block.operations):
        if other.operation == op.operation:
            return i
    raise AssertionError("op not in its block")


def _init_producers(members) -> list:
    """Inits of the group's ops that are computed from weights only (bias broadcast, -inf fill).

    Such an init shared with ops outside the group (the importer's one zero fill for all convs of a
    shape) is cloned for the group first: an op carries one fusion mark, and a shared full-size
    init left outside the loop would be read by the loop and so kept alive."""
    inits = []
    group = {_key(m) for m in members}
    for op in members:
        for index in range(_num_inputs(op), len(op.operands)):
            producer = _producer(op.operands[index])
            if producer is None or producer.name not in _INIT_PRODUCERS:
                continue
            ins = list(producer.operands)[:_num_inputs(producer)]
            if all(_producer(v) is not None and _producer(v).name in ("arith.constant", "tensor.expand_shape",
                                                                      "tensor.collapse_shape")
                   or not _is_static_tensor(v) for v in ins):
                if any(_key(use.owner) not in group for use in producer.results[0].uses):
                    producer = producer.clone(ip=ir.InsertionPoint(op))
                    op.operands[index] = producer.results[0]
                if all(_key(producer) != _key(i) for i in inits):
                    inits.append(producer)
    return inits


def _tile_width(width: int, limit: int) -> int:
    if limit <= 0 or limit >= width:
        return width
    return max(d for d in range(1, limit + 1) if width % d == 0)


# -- concat split (§3.3, Fig. 9b -> 9c) ------------------------------------------------------------


def split_concat_fconvs(func) -> int:
    """Rewrite `fconv(concat(a, b, ...))` (channel concat, 1×1 stride-1 conv with a constant weight)
    into `conv(b, W[:, C_a:], init = conv(a, W[:, :C_a], init))`: the concat's full tensor is no
    longer built and each part can be fused with the chain that produced it. Returns the count.
    An lconv over a concat (`temco-merge-lconvs`' merged lconv, Fig. 9a: its parts are reduced
    tensors) is left whole: splitting it would undo the merge."""
    count = 0
    for fconv in [op for op in walk_ops(func, _CONV) if _is_pointwise_conv(op)]:
        concat = _producer(fconv.operands[0])
        weight_op = _producer(fconv.operands[1])
        if (concat is None or concat.name != "tensor.concat" or weight_op is None
                or _role(fconv) == "lconv"
                or weight_op.name != "arith.constant"
                or ir.IntegerAttr(concat.attributes["dim"]).value != 1
                or len(list(concat.results[0].uses)) != 1):
            continue
        weight = constant_array(weight_op)
        element_type = ir.ShapedType(fconv.operands[1].type).element_type
        acc = fconv.operands[2]
        start = 0
        with ir.InsertionPoint(fconv), fconv.location:
            for part in concat.operands:
                channels = _shape(part)[1]
                w = make_constant(np.ascontiguousarray(weight[:, start:start + channels]), element_type)
                start += channels
                conv = linalg.Conv2DNchwFchwOp(result_tensors=[acc.type], inputs=[part, w], outputs=[acc],
                                               strides=fconv.attributes["strides"],
                                               dilations=fconv.attributes["dilations"])
                fill_conv_body(conv)
                for name in ("temco.role", "temco.layer"):
                    if name in fconv.attributes:
                        conv.operation.attributes[name] = fconv.attributes[name]
                acc = conv.results[0]
        fconv.results[0].replace_all_uses_with(acc)
        fconv.operation.erase()
        concat.operation.erase()
        count += 1
    return count


# -- the rewrite -----------------------------------------------------------------------------------


def fuse_activations(module, tile_width: int = 16, fuse_pooling: bool = True,
                     split_concat: bool = True, epilogues: bool = True,
                     affine_gathers: bool = True, merge_lconvs: bool = False,
                     where: str = "all") -> list[FusionReport]:
    """Apply `temco-fuse-activation` to every function of `module` (builtin.module op or ir.Module).

    With `epilogues`, elementwise roots (block outputs kept full-size) are tiled too. Each group is
    tiled and fused by its own transform sequence; where upstream tile-and-fuse stops early (it cannot
    fuse some producer), the group keeps what was fused so far (valid IR, some intermediates stay
    full-size) and the report lists it."""
    root = module.operation if hasattr(module, "operation") else module
    if where not in WHERE:
        raise VtmlirError(f"temco-fuse-activation: where must be one of {', '.join(WHERE)}, got '{where}'")
    return _fuse(root, tile_width, fuse_pooling, split_concat, epilogues, affine_gathers, merge_lconvs, where)


def _fuse(root, tile_width: int, fuse_pooling: bool, split_concat: bool, epilogues: bool,
          affine_gathers: bool, merge_lconvs: bool, where: str) -> list[FusionReport]:
    reports = []
    script: list = []  # one builder of a transform script body per group
    owners: list = []  # (report, group, producers to fuse) per script
    group_ops = 0
    for func in walk_ops(root, "func.func"):
        if not func.regions[0].blocks:
            continue
        report = FusionReport(ir.StringAttr(func.attributes["sym_name"]).value)
        reports.append(report)
        if affine_gathers:
            # UNet's nearest upsampling reads its source through an indexing map, so it fuses
            report.affine_gathers = len(gather_to_affine(func))
        if merge_lconvs:
            report.lconv_merges = len(_merge_lconvs(func))
        if split_concat:
            # BatchNorm/ReLU between a concat and its 1x1 conv (DenseNet) go to the parts first
            report.concat_pushes = len(push_through_concat(func))
            report.concat_splits = split_concat_fconvs(func)
        # consumers first: a root later in the program takes the chain feeding it (ResNet-50's
        # expanding 1x1 conv becomes part of the block output's group, not a group of its own)
        roots = [op.operation for op in func.regions[0].blocks[0].operations
                 if _is_pointwise_conv(op.operation) or (epilogues and (_is_elementwise_root(op.operation)
                                                                         or _is_pooling_root(op.operation)))]
        for fconv in reversed(roots):
            if _ATTR in fconv.attributes:  # already a member of a later root's group
                continue
            channel_tiles = fconv.name in _POOLS
            members, reason = _GroupFinder(fconv, fuse_pooling, channel_tiles,
                                           _tile_width(_shape(fconv.results[0])[3], tile_width)).find()
            if members is None:
                producer = _producer(fconv.operands[0])
                if fconv.name == _CONV and producer is not None and (_is_elementwise(producer)
                                                                     or producer.name in _POOLS):
                    report.skipped.append(f"fconv at {format_location(fconv.location)}: {reason}")
                continue
            if any(_ATTR in m.attributes for m in members):
                report.skipped.append(f"fconv at {format_location(fconv.location)}: its producers are already fused")
                continue
            destination = _in_place_destination(fconv, members) if fconv.name != _CONV else None
            if destination is not None:
                fconv.operands[_num_inputs(fconv)] = destination
            out_shape = _shape(fconv.results[0])
            # channel tiles: one channel of one image per tile (whole feature maps)
            rows = _tile_rows(members, out_shape[2])
            tile = [1, 1, 0, 0] if channel_tiles else [1, 0, rows, _tile_width(out_shape[3], tile_width)]
            g = group_ops
            group_ops += 1
            with fconv.context:
                fconv.attributes[_ATTR] = ir.StringAttr.get(f"g{g}.c")
                fuse = list(reversed(members)) + list(reversed(_init_producers(members)))
                for i, op in enumerate(fuse):
                    op.attributes[_ATTR] = ir.StringAttr.get(f"g{g}.p{i}")
            pads = [i for i, op in enumerate(fuse) if op.name == "tensor.pad"]
            wide = None if channel_tiles or tile[3] == out_shape[3] else [1, 0, rows, out_shape[3]]
            script.append((functools.partial(_build_group_script, g, tile, len(fuse), pads),
                           wide and functools.partial(_build_group_script, g, wide, len(fuse), pads), out_shape[3]))
            pooled = any(m.name in _POOLS for m in members)
            report.groups.append(FusedGroup(
                kind=_group_kind(fconv),
                in_place=destination is not None,
                fconv=format_location(fconv.location),
                lconvs=[format_location(m.location) for m in members if m.name == _CONV],
                ops=[m.name.removeprefix("linalg.") for m in members],
                tile=[1, 1, out_shape[2], out_shape[3]] if channel_tiles else [1, out_shape[1], rows, tile[3]],
                avoided_bytes=sum(shaped_bytes(m.results[0].type) or 0 for m in members),
                pooling=pooled))
            owners.append((report, report.groups[-1], len(fuse)))
    if not script:
        return reports
    pending = [_Pending(g, report, group, count, builder, wide, width)
               for g, ((report, group, count), (builder, wide, width)) in enumerate(zip(owners, script))]
    if where == "peak":
        pending = _groups_at_peak(root, pending)
    _apply_groups(root, pending)
    if not root.verify():
        raise PassFailure("temco-fuse-activation: the fused module does not verify")
    return reports


@dataclass
class _Pending:
    """A group found and tagged (`temco.fuse` = g<g>.c, g<g>.p<i>), not yet tiled and fused."""

    g: int
    report: FusionReport
    group: FusedGroup
    producers: int  # tagged ops to fuse, g<g>.p0 .. p<producers-1>
    script: object  # builder of its transform script
    wide: object = None  # the same with whole rows as tiles (None: the tile is whole rows already)
    width: int = 0  # the root's output width (a whole row)


def _apply_groups(root, pending: list[_Pending]) -> None:
    """Tile and fuse the `pending` groups under `root` (the model, or a copy of it: the groups' ops
    are found by their tags), then clean up and strip the tags of every group."""
    tagged = {ir.StringAttr(op.attributes[_ATTR]).value: op for op in walk_ops(root) if _ATTR in op.attributes}
    for p in pending:
        ops = [tagged[f"g{p.g}.c"]] + [tagged[f"g{p.g}.p{i}"] for i in range(p.producers)]
        try:
            with _Isolated(ops) as scratch:
                apply_transform_script(scratch, p.script)
        except ValueError as err:  # the interpreter emitted its diagnostics; the IR so far is valid
            p.group.complete = False
            p.report.skipped.append(f"group at {p.group.fconv}: tile-and-fuse stopped early "
                                    f"({str(err).strip().splitlines()[-1] if str(err).strip() else 'no message'})")
    try:
        apply_transform_script(root, _build_cleanup_script)
    except ValueError as err:
        raise PassFailure(f"temco-fuse-activation: cleaning up the fused loops failed: {err}") from None
    with root.context:
        _mark_loops_and_strip(root)


def _groups_at_peak(root, pending: list[_Pending]) -> list[_Pending]:
    """The groups to fuse with `where=peak`, per function: those that keep the function's internal
    peak at what the TeMCO rewrites reach (every group fused, every pad built in place), evaluated
    with the backend's allocation replay on copies. Groups are left unfused smallest first (by the
    bytes of full-size intermediates they avoid: a group that avoids less is further from the peak),
    the longest such run that keeps the peak, found by bisection (one replay per step). Then the
    fused groups get whole rows as tiles (fewer, longer tile contractions) if that keeps the peak
    too (one replay); else they keep `tile-width`."""
    # The backend (bufferization, the replay) only when a decision is made: importing it loads the
    # JIT's runtime libraries.
    from ..vtc import peak_of_edited_copy

    def peak(function: str, fused: list[_Pending], wide: bool = False) -> int:
        def fuse(copy) -> None:
            # the copy's own report entries: what happens on it is not reported
            _apply_groups(copy.operation, [_Pending(p.g, FusionReport(function),
                                                    FusedGroup(p.group.fconv, [], [], [], 0),
                                                    p.producers, (p.wide or p.script) if wide else p.script)
                                           for p in fused])
            pad_in_place(copy, "all")

        return peak_of_edited_copy(root, function, fuse)

    chosen = []
    for report in {id(p.report): p.report for p in pending}.values():
        groups = [p for p in pending if p.report is report]
        order = sorted(groups, key=lambda p: p.group.avoided_bytes)
        try:
            target = peak(report.function, groups)
            low, high = 0, len(order)  # order[:low] can be left unfused; order[:high + 1] cannot
            while low < high:
                mid = (low + high + 1) // 2
                if peak(report.function, order[mid:]) <= target:
                    low = mid
                else:
                    high = mid - 1
            fused = order[low:]
            widen = any(p.wide for p in fused) and peak(report.function, fused, wide=True) <= target
        except VtmlirError as err:
            # The replay cannot model this function: fuse every group, as `where=all`.
            report.skipped.append(f"peak not evaluated ({str(err).splitlines()[0]}): every group fused")
            chosen.extend(groups)
            continue
        for p in order[:low]:
            report.groups.remove(p.group)
            report.skipped.append(f"group at {p.group.fconv}: not fused, the peak ({target} B) is elsewhere")
        for p in fused:
            if widen and p.wide:
                p.script = p.wide
                p.group.tile[3] = p.width
        chosen.extend(fused)
    return sorted(chosen, key=lambda p: p.g)


class _Isolated:
    """Moves one group's ops (root first, then the ops to fuse) into a scratch module for the
    duration of its transform script, and the result back to where the root was.

    Upstream `fuse_into_containing_op` prints the producer and the loop into a diagnostic for every
    producer, even when fusion succeeds; printing an op numbers and verifies its whole top-level op,
    so on the model's module each fused op cost time proportional to the model (minutes for
    DenseNet-121, whose split dense layers fuse hundreds of ops). In the scratch module it is
    proportional to the group. Values from outside the group become arguments of the scratch
    function and are put back afterwards; the root's result keeps its users outside (the transform
    replaces it by the loop's result in place), and dead leftovers are dropped before moving back."""

    def __init__(self, group: list):
        self.root = group[0]
        self.ops = sorted(group, key=functools.cmp_to_key(
            lambda a, b: 0 if a == b else (-1 if a.is_before_in_block(b) else 1)))

    def __enter__(self):
        block = self.root.block
        after = False
        for op in block.operations:  # the first op after the root: the loop goes before it
            if after:
                self.anchor = op.operation
                break
            after = op.operation == self.root
        inside = set()
        for op in self.ops:
            for nested in walk_ops(op):
                inside.update(nested.results)
                for region in nested.regions:
                    for b in region.blocks:
                        inside.update(b.arguments)
        self.outside: list = []  # values from outside, in first-use order
        uses: list = []  # (op, operand index, index into self.outside)
        index: dict = {}
        for op in self.ops:
            for nested in walk_ops(op):
                for i, value in enumerate(nested.operands):
                    if value in inside:
                        continue
                    if value not in index:
                        index[value] = len(self.outside)
                        self.outside.append(value)
                    uses.append((nested, i, index[value]))
        with self.root.context, ir.Location.unknown():
            self.module = ir.Module.create()
            with ir.InsertionPoint(self.module.body):
                self.func = func_d.FuncOp("group", ([v.type for v in self.outside], [self.root.results[0].type]))
            entry = self.func.add_entry_block()
            for op in self.ops:
                entry.append(op)
            for op, i, k in uses:
                op.operands[i] = entry.arguments[k]
            with ir.InsertionPoint(entry):
                func_d.ReturnOp([self.root.results[0]])
        return self.module.operation

    def __exit__(self, *exc):
        apply_transform_script(self.module.operation, _build_dce_script)
        entry = self.func.entry_block
        for op in [o.operation for o in entry.operations][:-1]:
            op.move_before(self.anchor)
        for arg, value in zip(entry.arguments, self.outside):
            arg.replace_all_uses_with(value)
        return False


def _group_kind(root) -> str:
    if root.name == _CONV:
        return "lconv-act-fconv"
    return "lconv-act-pool" if root.name in _POOLS else "lconv-act"


def _match_tag(root: ir.Value, tag: str) -> ir.Value:
    """The ops under `root` tagged `temco.fuse = tag`."""
    return structured.MatchOp(transform.AnyOpType.get(), root, op_attrs={_ATTR: ir.StringAttr.get(tag)}).result


def _build_group_script(g: int, tile: list[int], producers: int, pads: list[int], root: ir.Value) -> None:
    """Tile the root, then fuse producers 0..producers-1 in order. A fused `tensor.pad` stays behind
    without users but still reading its source (upstream does not erase it), which would keep the
    source's producer from being moved into the loop: dead code is removed right after it."""
    tiled = structured.TileUsingForallOp(_match_tag(root, f"g{g}.c"), tile_sizes=list(tile))
    containing = tiled.forall_op
    transform.AnnotateOp(containing, "temco.fused_loop")
    for i in range(producers):
        fused = structured.FuseIntoContainingOp(_match_tag(root, f"g{g}.p{i}"), containing)
        containing = fused.new_containing_op
        if i in pads:
            _build_dce_script(root)


def _build_dce_script(root: ir.Value) -> None:
    """Dead code of every function removed."""
    transform.ApplyDeadCodeEliminationOp(structured.MatchOp.match_op_names(root, ["func.func"]).result)


def _build_cleanup_script(root: ir.Value) -> None:
    """After fusion: tensor.empty folded into its users, and CSE inside the fused loops."""
    funcs = structured.MatchOp.match_op_names(root, ["func.func"]).result
    patterns = transform.ApplyPatternsOp(funcs)
    with ir.InsertionPoint(patterns.patterns):
        transform_tensor.ApplyFoldTensorEmptyPatternsOp()
    loops = structured.MatchOp(transform.AnyOpType.get(), root, op_attrs={"temco.fused_loop": ir.UnitAttr.get()}).result
    transform.ApplyCommonSubexpressionEliminationOp(loops)


def _read_destination_through_loop(loop) -> None:
    """Inside a tiled loop writing in place into a tensor the group also reads (the ResNet skip the
    block output overwrites), read the tile through the loop's shared output, not the captured
    tensor: the slice is the one the iteration writes, so the values are the same, and one-shot
    bufferization then writes in place instead of copying the whole tensor first."""
    n_results = len(loop.results)
    shared = list(loop.operands)[len(loop.operands) - n_results:]
    body = loop.regions[0].blocks[0]
    args = list(body.arguments)[len(body.arguments) - n_results:]
    terminator = list(body.operations)[-1]
    inserts = [op.operation for op in terminator.regions[0].blocks[0].operations
               if op.operation.name == "tensor.parallel_insert_slice"] if len(terminator.regions) else []

    for value, arg in zip(shared, args):
        writes = [i for i in inserts if i.operands[1] == arg]
        if len(writes) != 1:
            continue
        want = (list(writes[0].operands)[2:], [str(writes[0].attributes[a]) for a in
                                                ("static_offsets", "static_sizes", "static_strides")])
        for use in list(value.uses):
            reader = use.owner.operation if hasattr(use.owner, "operation") else use.owner
            if reader.name != "tensor.extract_slice" or use.operand_number != 0 or reader.parent != loop:
                continue
            got = (list(reader.operands)[1:], [str(reader.attributes[a]) for a in
                                               ("static_offsets", "static_sizes", "static_strides")])
            if got[1] == want[1] and len(got[0]) == len(want[0]) and all(a == b for a, b in zip(got[0], want[0])):
                reader.operands[0] = arg


def _mark_loops_and_strip(root) -> None:
    """Mark each fused `scf.forall` (`temco.fused`) and drop the matching attributes."""
    for loop in walk_ops(root, "scf.forall"):
        if "temco.fused_loop" not in loop.attributes:
            continue
        del loop.attributes["temco.fused_loop"]
        inner = [op for op in walk_ops(loop) if _ATTR in op.attributes]
        pooled = any(op.name in _POOLS for op in inner)
        tiled = [op for op in inner if ir.StringAttr(op.attributes[_ATTR]).value.endswith(".c")]
        kind = "lconv-act-pool-fconv" if pooled else "lconv-act-fconv"
        if tiled and tiled[0].name != _CONV:
            kind = _group_kind(tiled[0])
        loop.attributes["temco.fused"] = ir.StringAttr.get(kind)
        _read_destination_through_loop(loop)
    for op in walk_ops(root):
        if _ATTR in op.attributes:
            del op.attributes[_ATTR]


@register_pass
class TemcoFuseActivation(Pass):
    name = "temco-fuse-activation"
    summary = "Fuse lconv -> activation (-> pooling) -> fconv into one tiled loop without full-size intermediates"
    description = (
        "TeMCO (ICPP'24) §3.2-3.3: tiles each 1x1 fconv over (N, H, W) with scf.forall and fuses the "
        "elementwise activations (ReLU, SiLU, GELU, BatchNorm, adds), pooling and the 1x1 lconvs that "
        "feed it into the loop (transform-dialect tile-and-fuse), so only tile-sized intermediates are "
        "allocated. split-concat first rewrites fconv(concat(a, b)) into accumulating convs (Fig. 9c)."
    )
    options = (
        Option("tile-width", int, 16, "tile width along W (rounded down to a divisor of W; 0: whole rows)"),
        Option("fuse-pooling", bool, True, "also fuse max/sum pooling between the activation and the fconv"),
        Option("split-concat", bool, True, "rewrite fconv(concat(...)) into accumulating 1x1 convs first (Fig. 9), "
               "after moving elementwise ops from the concat to its parts"),
        Option("affine-gathers", bool, True, "first rewrite gathers with affine indices (nearest upsampling) into "
               "generics reading their source, so they fuse"),
        Option("merge-lconvs", bool, False, "first merge concatenated lconvs into one block-diagonal lconv (Fig. 9a)"),
        Option("where", str, "all", "'all': fuse every group; 'peak': only the groups that keep the function's "
               "internal peak where every group fused and every pad built in place put it (backend replay), "
               "with whole rows as tiles if the peak stays"),
        Option("json", bool, False, "print the report as JSON"),
        report_option("one line per fused activation"),
    )

    def run(self, module):
        if self.tile_width < 0:
            self.emit_error(module, f"{self.name}: tile-width must be >= 0, got {self.tile_width}")
            return
        if self.where not in WHERE:
            self.emit_error(module, f"{self.name}: where must be one of {', '.join(WHERE)}, got '{self.where}'")
            return
        reports = fuse_activations(module, self.tile_width, self.fuse_pooling, self.split_concat,
                                   affine_gathers=self.affine_gathers, merge_lconvs=self.merge_lconvs,
                                   where=self.where)
        text = (_json.dumps([r.to_dict() for r in reports], indent=2) + "\n" if self.json
                else "".join(r.to_text() for r in reports))
        self.write_report(module, text)
        return reports
