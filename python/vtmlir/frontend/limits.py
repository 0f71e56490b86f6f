"""The limits vtmlir puts on its input, checked before MLIR sees it (README "Input limits").

MLIR's parser recurses once per level of nesting (regions, attribute arrays, parenthesised affine
expressions, nested types) and overflows the 8 MiB stack at a few thousand levels; it builds
per-element vectors for some ops, which abort ("SmallVector unable to grow") past 2^32 elements; the
code generators index with 32-bit integers in places. So, before any `.mlir` text is parsed:

- nesting: at most `MAX_NESTING` levels of brackets `( [ { <` (strings and comments do not count);
- tensor size: a `tensor`, `memref` or `vector` type holds at most `MAX_ELEMENTS` (2^31 - 1) elements;

and before code generation (`check_module`, on a parsed or imported module):

- the same tensor size on every value of the module;
- the entry function takes and returns at most `MAX_ARGUMENTS` tensors in all (the JIT's wrapper
  functions and their LLVM compile time grow with the flattened memref descriptors).

A violation is an `InputLimitError` (a `VtmlirError`) at `file:line:col` of the offending text.
Real models sit far inside these limits: imported models nest fewer than 30 levels deep, and a
2^31-element tensor is 8 GiB of f32.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from torch_mlir import ir

from ..errors import VtmlirError, format_location

MAX_NESTING = 256
MAX_ELEMENTS = 2**31 - 1
MAX_ARGUMENTS = 512


class InputLimitError(VtmlirError):
    """Input beyond one of vtmlir's limits; `line`/`col` (1-based) locate it in `file` when known."""

    def __init__(self, file: str, line: int, col: int, message: str):
        where = f"{file}:{line}:{col}" if line else file
        super().__init__(f"{where}: error: {message}")
        self.file, self.line, self.col, self.message = file, line, col, message


@dataclass(frozen=True)
class _Position:
    line: int
    col: int


def _position(text: str, offset: int) -> _Position:
    line = text.count("\n", 0, offset) + 1
    return _Position(line, offset - (text.rfind("\n", 0, offset) + 1) + 1)


# Strings (MLIR string literals never span lines) and `//` comments: their brackets are not nesting.
_STRING_OR_COMMENT = re.compile(rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|//[^\n]*')  # unrolled: linear time
# The static shape of a shaped type: `tensor<4x?x[8]x` (the element type after the last `x`), and
# of a torch-level tensor type: `!torch.vtensor<[4,-1,8],f32>`.
_SHAPED_TYPE = re.compile(rb"\b(?:tensor|memref|vector)<((?:(?:\?|\[?\d+\]?)\s*x\s*)+)")
_TORCH_TENSOR_TYPE = re.compile(rb"\b(?:vtensor|tensor)<\[([-\d,\s?]*)\]")
_DIM = re.compile(rb"\d+")
_BRACKET_DELTA = np.zeros(256, dtype=np.int8)
_BRACKET_DELTA[np.frombuffer(b"([{<", dtype=np.uint8)] = 1
_BRACKET_DELTA[np.frombuffer(b")]}>", dtype=np.uint8)] = -1


def check_text(text: str, source_name: str) -> None:
    """Raise an `InputLimitError` if `text` nests too deeply or spells a too-large shaped type."""
    raw = text.encode("utf-8", errors="surrogatepass")
    data = _STRING_OR_COMMENT.sub(lambda m: b" " * len(m.group()), raw)  # offsets stay
    codes = np.frombuffer(data, dtype=np.uint8)
    if codes.size:
        _check_nesting(text, raw, codes, source_name)
    for pattern in (_SHAPED_TYPE, _TORCH_TENSOR_TYPE):
        for m in pattern.finditer(data):
            elements = 1
            for dim in _DIM.findall(m.group(1)):  # `?` and torch's -1 (dynamic) have no digits
                elements *= int(dim)
            if elements > MAX_ELEMENTS:
                at = _position(text, _char_offset(raw, m.start()))
                spelled = m.group(0).decode(errors="replace")
                raise InputLimitError(
                    source_name, at.line, at.col,
                    f"'{spelled}...' has {elements} elements; vtmlir handles tensors of at most "
                    f"{MAX_ELEMENTS} (2^31 - 1) elements",
                )


def _char_offset(raw: bytes, byte_offset: int) -> int:
    return len(raw[:byte_offset].decode("utf-8", errors="replace"))


def _check_nesting(text: str, raw: bytes, codes: np.ndarray, source_name: str) -> None:
    delta = _BRACKET_DELTA[codes]
    # `->`, `>=` and `<=` are arrows and comparisons (affine sets), not brackets.
    not_bracket = np.zeros(codes.shape, dtype=bool)
    not_bracket[1:] |= (codes[1:] == ord(">")) & (codes[:-1] == ord("-"))
    not_bracket[:-1] |= ((codes[:-1] == ord(">")) | (codes[:-1] == ord("<"))) & (codes[1:] == ord("="))
    delta[not_bracket] = 0
    depth = np.cumsum(delta, dtype=np.int32)
    too_deep = np.flatnonzero(depth > MAX_NESTING)
    if too_deep.size:
        at = _position(text, _char_offset(raw, int(too_deep[0])))
        raise InputLimitError(
            source_name, at.line, at.col,
            f"nesting deeper than {MAX_NESTING} levels of brackets; vtmlir refuses it before parsing "
            "(MLIR's recursive parser would overflow the stack)",
        )


def shaped_element_count(t) -> int | None:
    """Elements of a statically shaped tensor/memref/vector type (dynamic dims count as 1), else None."""
    t = t.maybe_downcast() if hasattr(t, "maybe_downcast") else t
    if not isinstance(t, ir.ShapedType) or not t.has_rank:
        return None
    count = 1
    for i in range(t.rank):
        if not t.is_dynamic_dim(i):
            count *= t.get_dim_size(i)
    return count


def check_module(module, entry=None, source_name: str = "<module>") -> None:
    """Refuse a module with a value beyond `MAX_ELEMENTS`, or an `entry` function with more than
    `MAX_ARGUMENTS` arguments and results."""
    def too_big(t, where, what: str) -> None:
        count = shaped_element_count(t)
        if count is not None and count > MAX_ELEMENTS:
            raise VtmlirError(
                f"{format_location(where, source_name)}: error: {what} of type {t} has {count} elements; "
                f"vtmlir handles tensors of at most {MAX_ELEMENTS} (2^31 - 1) elements"
            )

    root = module.operation if hasattr(module, "operation") else module
    stack = [root]
    while stack:  # iterative: a module may nest regions deeper than Python's recursion limit
        op = stack.pop()
        for i, result in enumerate(op.results):
            too_big(result.type, op.location, f"result {i} of '{op.name}'")
        for region in op.regions:
            for block in region.blocks:
                for i, arg in enumerate(block.arguments):
                    too_big(arg.type, op.location, f"block argument {i} in '{op.name}'")
                stack.extend(inner.operation for inner in block.operations)
    if entry is not None:
        ftype = ir.FunctionType(ir.TypeAttr(entry.attributes["function_type"]).value)
        count = len(ftype.inputs) + len(ftype.results)
        if count > MAX_ARGUMENTS:
            name = ir.StringAttr(entry.attributes["sym_name"]).value
            raise VtmlirError(
                f"{format_location(entry.location, source_name)}: error: @{name} has {len(ftype.inputs)} "
                f"arguments and {len(ftype.results)} results; vtmlir compiles functions of at most "
                f"{MAX_ARGUMENTS} arguments and results in all"
            )
