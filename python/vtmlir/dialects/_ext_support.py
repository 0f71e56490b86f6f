"""Glue around `torch_mlir.dialects.ext` shared by the `vt` and `layout` op definitions.

`ext` gives every op with a variadic operand (or result) group an `operandSegmentSizes`
(`resultSegmentSizes`) attribute, and its accessors fail on IR that lacks it. MLIR (and IRDL) only
need that attribute when an op has two or more variadic groups; with one, the group's size follows
from the total count. `single_variadic` makes an op class work that way: its builder writes no segment
attribute and its accessors compute the group from the counts, so hand-written IR such as
`"vt.view"(%a, %b) {...}` parses, verifies and is readable from Python.
"""

from torch_mlir import ir
from torch_mlir.dialects.ext import partition_fields
from torch_mlir.dialects.irdl import Variadicity


def _group_slices(defs, count: int) -> list[slice]:
    fixed = sum(1 for d in defs if d.variadicity == Variadicity.single)
    slices, pos = [], 0
    for d in defs:
        n = 1 if d.variadicity == Variadicity.single else count - fixed
        slices.append(slice(pos, pos + n))
        pos += n
    return slices


def _install_accessors(cls, defs, values_of) -> None:
    for i, d in enumerate(defs):
        def getter(self, i=i, d=d):
            values = values_of(self)
            part = list(values)[_group_slices(defs, len(values))[i]]
            if d.variadicity == Variadicity.single:
                return part[0]
            if d.variadicity == Variadicity.optional:
                return part[0] if part else None
            return part
        setattr(cls, d.name, property(getter))


def single_variadic(cls):
    """Class decorator: drop segment-size attributes from an op with at most one variadic operand
    group and at most one variadic result group (see the module docstring)."""
    operands, attrs, results, regions = partition_fields(cls._fields)
    for kind, defs in (("operand", operands), ("result", results)):
        if sum(1 for d in defs if d.variadicity != Variadicity.single) > 1:
            raise TypeError(f"{cls.__name__}: more than one variadic {kind} group needs segment sizes")
    cls._ODS_OPERAND_SEGMENTS = None
    cls._ODS_RESULT_SEGMENTS = None
    _install_accessors(cls, operands, lambda op: op.operation.operands)
    _install_accessors(cls, results, lambda op: op.operation.results)

    signature = cls.__init__.__signature__

    def __init__(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        self = a["self"]
        flat_operands = []
        for d in operands:
            v = a[d.name]
            if d.variadicity == Variadicity.single:
                flat_operands.append(v)
            elif v is not None:
                flat_operands.extend([v] if isinstance(v, ir.Value) else list(v))
        flat_results = []
        for d in results:
            v = d.process_type(a[d.name])
            if d.variadicity == Variadicity.single:
                flat_results.append(v)
            elif v is not None:
                flat_results.extend([v] if isinstance(v, ir.Type) else list(v))
        attributes = {d.name: d.process_attr(a[d.name]) for d in attrs}
        ir.OpView.__init__(
            self,
            self.OPERATION_NAME,
            self._ODS_REGIONS,
            None,
            None,
            attributes=attributes,
            results=flat_results,
            operands=flat_operands,
            successors=None,
            regions=len(regions) or None,
            loc=a["loc"],
            ip=a["ip"],
        )

    __init__.__signature__ = signature
    cls.__init__ = __init__
    return cls


def fail(op, message: str) -> bool:
    """Report `message` at `op`'s location (MLIR-style `file:line:col: error: ...`); returns False
    so verifiers can `return fail(op, ...)`."""
    op.location.emit_error(message)
    return False


def ranked_shape(value_or_type) -> list[int] | None:
    t = value_or_type.type if isinstance(value_or_type, ir.Value) else value_or_type
    try:
        return list(ir.RankedTensorType(t).shape)
    except ValueError:
        return None

