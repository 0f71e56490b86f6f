"""`.mlir` text, files and `ir.Module`s as vtmlir input.

Everywhere vtmlir takes a module it takes any of: an `ir.Module` (re-homed into a vtmlir context if it
came from elsewhere), `.mlir` text, or a path to a `.mlir` file. Parse errors come back as a
`VtmlirError` with `file:line:col: error:` lines.

User text is parsed so that no input can kill the process (issue 18):
1. bytes are decoded as UTF-8; invalid UTF-8 is an error naming the byte offset (`decode_source`);
2. `limits.check_text` refuses nesting and tensor sizes beyond what MLIR's parser survives;
3. the text is parsed and verified first in a forked child (`vtmlir.crash_guard`): MLIR's C++ parser
   crashes on some malformed input (a SIGSEGV in an op's custom parser, heap corruption after some
   parse errors). When the child crashes, the input is cut at line boundaries and re-tried to name the
   first line that makes the parser crash; when it reports errors, those are the result and the
   text is never parsed in this process;
4. only text the child parsed and verified cleanly is parsed here.
Both parses also check what MLIR's verifiers leave out: every dynamic-size marker in an op's static
offsets, sizes, strides or padding stands for an SSA operand (`_check_mixed_lists`).
Text vtmlir printed itself (`as_module` of a foreign `ir.Module`) skips steps 1-3.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from torch_mlir import ir

from ..diagnostics import Diag, format_plain, to_diag
from ..context import make_context
from ..crash_guard import Crashed, Raised, TimedOut, guard_enabled, run_guarded
from ..errors import VtmlirError, from_mlir_error
from . import limits

_SINGLE_TOP_LEVEL = "source must contain a single top-level operation"
MLIR_BYTECODE_MAGIC = b"ML\xefR"


def decode_source(data: bytes, source_name: str) -> str:
    """`data` as text; invalid UTF-8 is a `VtmlirError` at its line and column naming the byte offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        col = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        byte = data[err.start : err.start + 1].hex()
        raise VtmlirError(
            f"{source_name}:{line}:{col}: error: the input is not valid UTF-8: byte 0x{byte} at offset "
            f"{err.start} ({err.reason})"
        ) from None


def parse_source(text: str, source_name: str, context: ir.Context,
                 allow_unregistered: bool = False) -> tuple[ir.Module | None, list[Diag]]:
    """Parse `.mlir` text like mlir-opt (several top-level ops get an implicit module) without any
    input being able to crash the process (module docstring). Returns the module, or None when the
    input is rejected, and every diagnostic the parse produced (errors carry `file:line:col`)."""
    try:
        limits.check_text(text, source_name)
    except limits.InputLimitError as err:
        return None, [Diag("error", err.message, "", source_name, err.line, err.col)]
    if guard_enabled():
        probe = run_guarded(_probe, text, source_name, allow_unregistered, timeout=_parse_timeout(text))
        if isinstance(probe, (Crashed, TimedOut, Raised)):
            return None, [_guard_failure(probe, text, source_name, allow_unregistered)]
        ok, diags = probe
        if not ok:
            return None, diags
    return _parse_collecting(text, source_name, context)


def parse_mlir(text: str, source_name: str = "-", context: ir.Context | None = None) -> ir.Module:
    """Parse `.mlir` text into a module in a vtmlir context (a new one unless given)."""
    ctx = context or make_context()
    module, diags = parse_source(text, source_name, ctx, allow_unregistered=ctx.allow_unregistered_dialects)
    if module is None:
        shown = [format_plain(d, source_name) for d in diags if d.severity == "error"]
        raise VtmlirError("\n".join(shown or [f"{source_name}: error: failed to parse"]))
    return module


def _parse_timeout(text: str) -> float:
    return 120.0 + len(text) / 1e6  # MLIR parses several MB/s; a parse that overruns this is hung


def _probe(text: str, source_name: str, allow_unregistered: bool) -> tuple[bool, list[Diag]]:
    """In the crash-guard child: parse and verify `text`; (parsed cleanly, diagnostics)."""
    ctx = make_context()
    ctx.enable_multithreading(False)  # the child has no threads of its own: keep it that way
    ctx.allow_unregistered_dialects = allow_unregistered
    module, diags = _parse_collecting(text, source_name, ctx)
    return module is not None, diags


def _guard_failure(probe, text: str, source_name: str, allow_unregistered: bool) -> Diag:
    if isinstance(probe, TimedOut):
        return Diag("error", f"parsing did not finish in {probe.seconds:.0f} s", "", None, 0, 0)
    if isinstance(probe, Raised):
        return Diag("error", f"internal error while parsing: {probe.type_name}: {probe.message}", "", None, 0, 0)
    line = _first_crashing_line(text, source_name, allow_unregistered)
    message = (f"malformed input: MLIR's parser crashes on it ({probe.describe()}); vtmlir caught the crash"
               + ("" if line else " but could not tell which line causes it"))
    if line:
        col = len(text.split("\n")[line - 1]) - len(text.split("\n")[line - 1].lstrip()) + 1
        return Diag("error", message + "; this is the first line that makes it crash", "", source_name, line, col)
    return Diag("error", message, "", None, 0, 0)


def _first_crashing_line(text: str, source_name: str, allow_unregistered: bool) -> int:
    """The smallest k such that the first k lines of `text` crash the parser (0 if none does)."""
    lines = text.split("\n")

    def crashes(k: int) -> bool:
        prefix = "\n".join(lines[:k])
        return isinstance(run_guarded(_probe, prefix, source_name, allow_unregistered,
                                      timeout=_parse_timeout(prefix)), Crashed)

    lo, hi = 1, len(lines)  # invariant: the first `hi` lines crash
    if not crashes(hi):
        return 0  # not reproducible (heap corruption can be)
    while lo < hi:
        mid = (lo + hi) // 2
        if crashes(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


# An op's static lists of offsets, sizes and strides (slices, subviews) or of padding (`tensor.pad`)
# hold MLIR's dynamic-size marker (INT64_MIN, `ShapedType::kDynamic`) where an SSA operand gives the
# value; the operands follow the lists' order at the end of the op's operand segments. `tensor.pad`'s
# verifier does not check that they match: `low[0, 0, -9223372036854775808]` (a fuzzer's integer)
# parsed and verified, and its folders and printer then read an operand that does not exist
# (SIGSEGV; fuzz seed 1800 case 1434).
DYNAMIC_MARKER = -(2**63)
_MIXED_LISTS = (("static_offsets", "static_sizes", "static_strides"), ("static_low", "static_high"))


def _check_mixed_lists(root) -> bool:
    """Emit an error at each op whose static lists mark more or fewer entries dynamic than it has
    operands for them; whether all are consistent."""
    ok = True
    stack = [root.operation]
    while stack:  # iterative: nesting may be deeper than Python's recursion limit
        op = stack.pop()
        for region in op.regions:
            for block in region.blocks:
                stack.extend(inner.operation for inner in block.operations)
        attrs = op.attributes
        names = next(([n for n in group if n in attrs] for group in _MIXED_LISTS
                      if any(n in attrs for n in group)), [])
        if not names or "operandSegmentSizes" not in attrs:
            continue
        segments = list(ir.DenseI32ArrayAttr(attrs["operandSegmentSizes"]))
        if len(segments) < len(names):
            continue
        for name, operands in zip(names, segments[len(segments) - len(names):]):
            try:
                marked = sum(1 for v in ir.DenseI64ArrayAttr(attrs[name]) if v == DYNAMIC_MARKER)
            except ValueError:  # not an i64 array: the op's verifier has refused it already
                continue
            if marked != operands:
                op.location.emit_error(
                    f"'{op.name}' op {name} marks {marked} entr{'y' if marked == 1 else 'ies'} dynamic "
                    f"({DYNAMIC_MARKER}) but has {operands} dynamic operand(s) for them")
                ok = False
    return ok


def _parse_collecting(text: str, source_name: str, ctx: ir.Context) -> tuple[ir.Module | None, list[Diag]]:
    """Parse in `ctx`, every diagnostic collected (none escapes to other handlers); a parsed module
    whose static lists do not match its operands (`_check_mixed_lists`) is refused."""
    diags: list[Diag] = []

    def handler(d):
        diags.append(to_diag(d))
        return True

    saved = ctx.emit_error_diagnostics
    ctx.emit_error_diagnostics = True
    handle = ctx.attach_diagnostic_handler(handler)
    try:
        try:
            op = ir.Operation.parse(text, source_name=source_name, context=ctx)
        except ir.MLIRError:
            if not (len(diags) == 1 and _SINGLE_TOP_LEVEL in diags[0].message):
                return None, diags
            diags.clear()
            try:
                op = ir.Operation.parse(_wrap_in_module(text), source_name=source_name, context=ctx)
            except ir.MLIRError:
                return None, diags
        if not _check_mixed_lists(op):
            return None, diags
        return _as_module(op, ctx), diags
    finally:
        handle.detach()
        ctx.emit_error_diagnostics = saved


def _as_module(op, ctx: ir.Context) -> ir.Module:
    """An `ir.Module` holding what `op` (from `Operation.parse`, which knows the source name) holds:
    a parsed `builtin.module` gives its attributes and body ops, any other op is wrapped in a module
    located where it is (so errors a pass reports on the module still say `file:line:col`)."""
    op = op.operation
    with ctx:
        if op.name != "builtin.module":
            module = ir.Module.create(op.location)
            module.body.append(op)
            return module
        module = ir.Module.create(op.location)
        for i in range(len(op.attributes)):
            named = op.attributes[i]
            module.operation.attributes[named.name] = named.attr
        for inner in list(op.regions[0].blocks[0].operations):
            module.body.append(inner)
    return module


def _wrap_in_module(text: str) -> str:
    """Wrap several top-level ops in `module { ... }` like mlir-opt's implicit module, without moving
    any line: `module {` goes on the blank or comment line just before the first op (after attribute
    and type aliases, which must stay outside), else in front of that op's line; `}` goes at the end,
    before a `{-# ... #-}` resource section if there is one."""
    top_level_def = re.compile(r"^\s*[#!][\w$.\-]+\s*=")
    lines = text.split("\n")

    def is_trivia(line: str) -> bool:
        stripped = line.strip()
        return not stripped or stripped.startswith("//")

    first_op = next(
        (i for i, line in enumerate(lines) if not is_trivia(line) and not top_level_def.match(line)), len(lines)
    )
    if first_op > 0 and is_trivia(lines[first_op - 1]):
        lines[first_op - 1] = "module {" + lines[first_op - 1]
    elif first_op < len(lines):
        lines[first_op] = "module {" + lines[first_op]
    else:
        lines.append("module {")
    for i in range(first_op, len(lines)):
        if lines[i].lstrip().startswith("{-#"):
            lines[i] = "}" + lines[i]
            return "\n".join(lines)
    return "\n".join(lines) + "\n}"


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and len(text) < 4096 and (text.endswith((".mlir", ".mlirbc")) or os.path.isfile(text))


def as_module(source, context: ir.Context | None = None) -> ir.Module:
    """An `ir.Module` in a vtmlir context from a module, `.mlir` text or bytes, or a path."""
    if isinstance(source, ir.Module):
        if context is None and _has_vtmlir_dialects(source.context):
            return source
        return _reparse_printed(source, context)
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source)
        if not path.is_file():
            raise VtmlirError(f"{path}: error: no such file")
        try:
            data = path.read_bytes()
        except OSError as err:
            raise VtmlirError(f"{path}: error: cannot read the file: {err.strerror}") from None
        return _parse_bytes(data, str(path), context)
    if isinstance(source, (bytes, bytearray)):
        return _parse_bytes(bytes(source), "<bytes>", context)
    if isinstance(source, str):
        return parse_mlir(source, "<string>", context)
    raise VtmlirError(
        f"error: expected an nn.Module, an ir.Module, .mlir text or a path, got {type(source).__name__}"
    )


def _parse_bytes(data: bytes, source_name: str, context: ir.Context | None) -> ir.Module:
    if data.startswith(MLIR_BYTECODE_MAGIC):
        raise VtmlirError(f"{source_name}: error: MLIR bytecode is not accepted; convert it to text first "
                          "(`mlir-opt file.mlirbc -o file.mlir`)")
    return parse_mlir(decode_source(data, source_name), source_name, context)


def _reparse_printed(module: ir.Module, context: ir.Context | None) -> ir.Module:
    """`module` in another (vtmlir) context: its printout, with locations, parsed there. The text is
    MLIR's own, so it needs none of the guards user text gets."""
    ctx = context or make_context()
    try:
        return ir.Module.parse(module.operation.get_asm(enable_debug_info=True), ctx)
    except ir.MLIRError as err:
        raise from_mlir_error(err, "<module>") from None


def _has_vtmlir_dialects(ctx: ir.Context) -> bool:
    return ctx.is_dialect_loaded("vt") and ctx.is_dialect_loaded("layout")
