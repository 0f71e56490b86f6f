"""Building transform-dialect IR through the bindings: small wrappers over the generated op builders
so a schedule reads like the transform IR it makes (`tile`, `peel`, `promote`, `vectorize`, ...).

Every op here is an upstream transform op built with its Python builder; none is printed text.
Handles are `!transform.any_op` except where an op demands a narrower type (`loop.peel` takes an
`scf.for` handle, so the loop is cast first).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from torch_mlir import ir
from torch_mlir.dialects import transform
from torch_mlir.dialects import _structured_transform_ops_gen as structured_gen
from torch_mlir.dialects.transform import loop, structured
from torch_mlir.dialects.transform import memref as transform_memref
from torch_mlir.dialects.transform import vector as transform_vector

from .kernels import KERNEL_ATTR, SCHEDULED_ATTR


def any_op() -> ir.Type:
    return transform.AnyOpType.get()


def kernel_id_attr(kernel_id: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), kernel_id)


def match_kernel(scope: ir.Value, kernel_id: int) -> ir.Value:
    """All ops under `scope` tagged `codegen.kernel = kernel_id` (the kernel and its tiled pieces)."""
    return structured.MatchOp(any_op(), scope, op_attrs={KERNEL_ATTR: kernel_id_attr(kernel_id)}).result


def match_scheduled(scope: ir.Value, count: int) -> list[ir.Value]:
    """One handle per kernel marked `codegen.scheduled`, in program order: one walk of the module
    (a match per kernel would walk it once per kernel: quadratic on a DenseNet)."""
    every = structured.MatchOp(any_op(), scope, op_attrs={SCHEDULED_ATTR: ir.UnitAttr.get()}).result
    if count == 1:
        return [every]
    return list(transform.SplitHandleOp([any_op()] * count, every).results)


def match_names(scope: ir.Value, names: Sequence[str]) -> ir.Value:
    return structured.MatchOp.match_op_names(scope, list(names)).result


def tile_forall(target: ir.Value, tile_sizes: Sequence[int]) -> tuple[ir.Value, ir.Value]:
    """Tile into an `scf.forall` (the parallel loop); returns (tiled op, forall)."""
    op = structured.TileUsingForallOp(target, tile_sizes=list(tile_sizes))
    return op.tiled_op, op.forall_op


def tile(target: ir.Value, sizes: Sequence[int], interchange: Sequence[int] | None = None
         ) -> tuple[ir.Value, list[ir.Value]]:
    """Tile into `scf.for` loops (one per non-zero size, outermost first: in the order of the loop
    dimensions, or of `interchange`, a permutation of them); returns (tiled op, loops)."""
    op = structured.TileUsingForOp(target, sizes=list(sizes), interchange=list(interchange) if interchange else None)
    return op.tiled_linalg_op, list(op.loops)


def parent_op(target: ir.Value, name: str = "") -> ir.Value:
    """The op whose block holds the payload ops of `target` (a function, a loop body's loop); with
    `name`, the closest ancestor of that op name (e.g. "builtin.module")."""
    if name:
        return transform.GetParentOp(any_op(), target, op_name=name).result
    return transform.GetParentOp(any_op(), target).result


def fuse_sibling(first: ir.Value, second: ir.Value) -> ir.Value:
    """One loop running the body of the `first` loop, then the body of the `second`, at the
    `second`'s place (`transform.loop.fuse_sibling`: two `scf.forall`s with the same bounds and
    steps, or two `scf.for`s with the same bound values); returns the fused loop."""
    return loop.LoopFuseSiblingOp(any_op(), first, second).result


def annotate(target: ir.Value, name: str) -> None:
    """Set the unit attribute `name` on the payload ops of the handle."""
    transform.AnnotateOp(target, name)


def peel(loop_handle: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Split the loop into full tiles and one remainder iteration (static once canonicalised);
    returns (full-tile loop, remainder loop) handles."""
    for_type = transform.OperationType.get("scf.for")
    casted = transform.CastOp(for_type, loop_handle).result
    peeled = loop.LoopPeelOp(any_op(), any_op(), casted, fail_if_already_divisible=False)
    return peeled.peeled_loop, peeled.remainder_loop


def unroll(loop_handle: ir.Value, factor: int) -> None:
    """Unroll the `scf.for` loops of the handle by `factor` (their trip count: fully)."""
    loop.LoopUnrollOp(loop_handle, factor=factor)


def generalize(target: ir.Value) -> ir.Value:
    """A named structured op as the `linalg.generic` it stands for (attributes kept)."""
    return structured.GeneralizeOp(target).transformed


def promote(target: ir.Value, operands: Sequence[int]) -> ir.Value:
    """Copy the named operands' tiles into 64-byte aligned stack buffers (packing, §10 of the notes)."""
    return structured_gen.PromoteOp(any_op(), target, operands_to_promote=list(operands), use_alloca=True,
                                    alignment=64).result


def vectorize(target: ir.Value, sizes: Sequence[int] | None = None) -> None:
    """Vectorise the structured ops of the handle (contractions as `vector.contract`). With `sizes`
    (one per loop) every op gets vectors of those sizes, masked where the op is smaller: a peeled
    remainder tile then runs on the same registers as the full tiles instead of odd-sized vectors."""
    sizes = list(sizes or [])
    structured_gen.VectorizeOp(target, [], static_vector_sizes=sizes, scalable_sizes=[False] * len(sizes),
                               create_named_contraction=True)


def canonicalize(scope: ir.Value, fold_memref_aliases: bool = False) -> None:
    patterns = transform.ApplyPatternsOp(scope)
    with ir.InsertionPoint(patterns.patterns):
        if fold_memref_aliases:
            transform_memref.ApplyFoldMemrefAliasOpsPatternsOp()
        transform.ApplyCanonicalizationPatternsOp()


def drop_leading_unit_dims(scope: ir.Value) -> None:
    """vector<1x1x32xf32> → vector<32xf32>: tiles of 1 leave leading unit dimensions, and LLVM's
    lowering of math ops takes 1-D vectors only."""
    patterns = transform.ApplyPatternsOp(scope)
    with ir.InsertionPoint(patterns.patterns):
        transform_vector.ApplyCastAwayVectorLeadingOneDimPatternsOp()
        transform.ApplyCanonicalizationPatternsOp()


def drop_unit_vector_dims(scope: ir.Value) -> None:
    """Unit dimensions out of the vector code a register tile leaves (compile time, not run time):
    the k step of 1 makes every multiply of a contraction's tile vector<12x16x1xf32> (with leading
    unit dims for the batch and image loops), which LLVM receives as 192 one-lane vectors and has to
    put back together (temco_resnet18: 99k LLVM dialect ops, 42k without them). The transfers' broadcast
    permutations become plain reads and broadcasts first, so that their unit dims can go as well. Only
    shapes change: every element is computed by the same operations."""
    patterns = transform.ApplyPatternsOp(scope)
    with ir.InsertionPoint(patterns.patterns):
        transform_vector.ApplyTransferPermutationPatternsOp()
        transform.ApplyCanonicalizationPatternsOp()
    patterns = transform.ApplyPatternsOp(scope)
    with ir.InsertionPoint(patterns.patterns):
        transform_vector.ApplyDropUnitDimWithShapeCastPatternsOp()
        transform_vector.ApplyCastAwayVectorLeadingOneDimPatternsOp()
        transform.ApplyCanonicalizationPatternsOp()


def cse(scope: ir.Value) -> None:
    transform.ApplyCommonSubexpressionEliminationOp(scope)


def hoist_vector_transfers(func_handle: ir.Value) -> ir.Value:
    """Keep loop-carried vectors (the register tile's accumulators) in registers; returns the new handle."""
    return structured.HoistRedundantVectorTransfersOp(any_op(), func_handle).result


def lower_contractions(scope: ir.Value) -> None:
    """vector.contract → elementwise multiplies and adds (`parallelarith`): a separate multiply and
    add per step as in the scalar loops, not the fused multiply-add the outer-product lowering makes
    (a different rounding). A register tile's k step of 1 vectorises to multiplies and adds already;
    a contraction over several unit k dimensions (blocked channels) arrives as vector.contract."""
    patterns = transform.ApplyPatternsOp(scope)
    with ir.InsertionPoint(patterns.patterns):
        transform_vector.ApplyLowerContractionPatternsOp(
            lowering_strategy=transform_vector.VectorContractLowering.ParallelArith)


def lower_transposes(scope: ir.Value, vector_bits: int) -> None:
    """A transfer_read with a permutation map (a transposing copy's tile) → a plain read and a
    vector.transpose, lowered to shuffles: 16x16 blocks on AVX-512, 8x8 with AVX2's lowering."""
    patterns = transform.ApplyPatternsOp(scope)
    with ir.InsertionPoint(patterns.patterns):
        transform_vector.ApplyTransferPermutationPatternsOp()
    patterns = transform.ApplyPatternsOp(scope)
    with ir.InsertionPoint(patterns.patterns):
        strategy = (transform_vector.VectorTransposeLowering.Shuffle16x16 if vector_bits >= 512
                    else transform_vector.VectorTransposeLowering.Shuffle1D)
        transform_vector.ApplyLowerTransposePatternsOp(lowering_strategy=strategy,
                                                       avx2_lowering_strategy=vector_bits == 256)


def lower_multi_reductions(scope: ir.Value) -> None:
    """vector.multi_reduction → vector.reduction per row (innermost reduction) or elementwise ops."""
    patterns = transform.ApplyPatternsOp(scope)
    with ir.InsertionPoint(patterns.patterns):
        transform_vector.ApplyReorderMultiReductionPatternsOp(
            lowering_strategy=transform_vector.VectorMultiReductionLowering.InnerReduction)
        transform_vector.ApplyMultiReductionFlatteningPatternsOp(
            lowering_strategy=transform_vector.VectorMultiReductionLowering.InnerReduction)
        transform_vector.ApplyMultiReductionUnrollingPatternsOp(
            lowering_strategy=transform_vector.VectorMultiReductionLowering.InnerReduction)


def named_sequence(parent_block: ir.Block, name: str, consumed: bool) -> transform.NamedSequenceOp:
    """`transform.named_sequence @name(%arg: !transform.any_op {transform.consumed|readonly})`."""
    effect = "transform.consumed" if consumed else "transform.readonly"
    with ir.InsertionPoint(parent_block):
        return transform.NamedSequenceOp(name, [any_op()], [], arg_attrs=[{effect: ir.UnitAttr.get()}])


@contextmanager
def sequence(operand: ir.Value, suppress_failures: bool) -> Iterator[ir.Value]:
    """Build a kernel's ops on `operand` in the with-block. With `suppress_failures` they go into a
    nested `transform.sequence %operand failures(suppress)` (the yielded handle is its block argument):
    a schedule that cannot apply then leaves its kernel as it is (correct loops, named in the
    report) instead of failing the compilation, and the ops after the sequence still run. Without,
    they are built in place on `operand` itself (a failure propagates). Either way the ops consume or
    only read `operand` as they would the argument of a named sequence of their own, without the
    `transform.include` whose callee every verification looks up among the module's symbols."""
    if not suppress_failures:
        yield operand
        return
    seq = transform.SequenceOp(transform.FailurePropagationMode.Suppress, [], operand)
    with ir.InsertionPoint(seq.body):
        yield seq.bodyTarget
        yield_()


@contextmanager
def foreach(operand: ir.Value) -> Iterator[ir.Value]:
    """Build ops in the with-block once per payload op of `operand` (`transform.foreach`; the yielded
    handle holds one op), none when it has none: a schedule's ops need exactly one op in their handle."""
    each = transform.ForeachOp([], [operand])
    with ir.InsertionPoint(each.body):
        yield each.bodyTargets[0]
        yield_()


def yield_() -> None:
    transform.YieldOp([])
