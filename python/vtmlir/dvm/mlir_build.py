"""Shorthands over the MLIR Python bindings for the IR the DVM builds once per process or per
template set (the VM, `native_mlir`; the native fill, `native_fill`). They only name the builders
of the upstream dialects; every op is created through the bindings. The current context, location
and insertion point apply, as for the builders themselves."""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, func

DYNAMIC = ir.ShapedType.get_dynamic_size()


def index() -> ir.Type:
    return ir.IndexType.get()


def i(bits: int) -> ir.Type:
    """The signless integer type of `bits` bits."""
    return ir.IntegerType.get_signless(bits)


def f(bits: int) -> ir.Type:
    return {16: ir.F16Type, 32: ir.F32Type, 64: ir.F64Type}[bits].get()


def scalar(name: str) -> ir.Type:
    """The builtin scalar type spelled `name` ("index", "i1" .. "i64", "f16" .. "f64")."""
    if name == "index":
        return index()
    return (i if name[0] == "i" else f)(int(name[1:]))


def memref(elt: ir.Type, *shape: int) -> ir.Type:
    """``memref<?x elt>`` by default, else of the given static `shape`."""
    return ir.MemRefType.get(list(shape) or [DYNAMIC], elt)


def const(ty: ir.Type, value) -> ir.Value:
    """``arith.constant value : ty`` (a bool for i1, a float for a float type)."""
    if isinstance(value, bool):
        value = int(value)
    return arith.ConstantOp(ty, value).result


def cidx(value: int) -> ir.Value:
    return const(index(), value)


def function(name: str, args, results=(), private: bool = False, attrs: dict | None = None):
    """A `func.func` with an entry block at the insertion point: (op, entry block)."""
    op = func.FuncOp(name, (list(args), list(results)), visibility="private" if private else None)
    for key, value in (attrs or {}).items():
        op.attributes[key] = value
    return op, op.add_entry_block()


def call(name: str, args, results=()) -> list[ir.Value]:
    """``func.call @name(args)``: its results."""
    return list(func.CallOp(list(results), ir.FlatSymbolRefAttr.get(name), list(args)).results)
