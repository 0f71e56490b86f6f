"""Glue around `torch_mlir.dialects.ext` shared by the `vt` and `layout` op definitions.

IRDL binds every constraint variable to ONE attribute per op: all operands of a variadic group must
have the *same* type (`"expected 'tensor<2x4xf32>' but got 'tensor<3x4xf32>'"`). A virtual tensor's
sources differ in shape, so `vt` ops declare `MAX_TYPE_GROUPS` variadic operand groups
(`sources_0`..`sources_7`), each with its own constraint, and the builders put each run of
consecutive equal-typed values into one group (Q | K-cache, V-cache is two groups; a DenseNet concat
x | f1..f32 is two groups). Semantics only ever see the flat list (`op.sources`); the groups are a
typing artefact recorded in `operandSegmentSizes` / `resultSegmentSizes`.
"""

from collections.abc import Sequence

from torch_mlir import ir

#: Variadic groups per heterogeneous operand list (runs of equal type it can hold).
MAX_TYPE_GROUPS = 8


def type_groups(items: Sequence, max_groups: int = MAX_TYPE_GROUPS, what: str = "operands",
                key=None) -> list[list]:
    """Split `items` into runs of consecutive equal type, padded with empty runs to `max_groups`."""
    key = key or (lambda v: v.type if isinstance(v, ir.Value) else v)
    groups: list[list] = []
    for item in items:
        if groups and key(groups[-1][-1]) == key(item):
            groups[-1].append(item)
        else:
            groups.append([item])
    if len(groups) > max_groups:
        raise ValueError(f"{len(groups)} runs of differently typed {what}; at most {max_groups} "
                         f"are supported (reorder so equal types are adjacent)")
    return groups + [[] for _ in range(max_groups - len(groups))]


def group_sizes(items: Sequence, max_groups: int = MAX_TYPE_GROUPS, key=None) -> list[int]:
    return [len(g) for g in type_groups(items, max_groups, key=key)]


def fail(op, message: str) -> bool:
    """Report `message` at `op`'s location (MLIR-style `file:line:col: error: ...`); returns False
    so verifiers can `return fail(op, ...)`."""
    op.location.emit_error(message)
    return False


def guarded_verifier(verify):
    """Make a Python `verify_invariants` report any exception it raises as a verification error at the
    op (a malformed attribute can surprise a decoder; MLIR must get `false`, not a Python exception
    through its parser)."""

    def wrapper(op) -> bool:
        try:
            return verify(op)
        except Exception as exc:  # noqa: BLE001 - whatever the decoder raised, the op is invalid
            return fail(op, f"'{op.operation.name}' op is malformed: {type(exc).__name__}: {exc}")

    wrapper.__doc__ = verify.__doc__
    return staticmethod(wrapper)


def missing_attribute(op, *names: str) -> bool:
    """Report the first of `names` absent from `op` (the Python verifier can run before IRDL's own
    structural check); True when one is missing."""
    for name in names:
        if name not in op.operation.attributes:
            fail(op, f"'{op.operation.name}' op attribute {name} is expected but not provided")
            return True
    return False


def ranked_shape(value_or_type) -> list[int] | None:
    t = value_or_type.type if isinstance(value_or_type, ir.Value) else value_or_type
    try:
        return list(ir.RankedTensorType(t).shape)
    except ValueError:
        return None

