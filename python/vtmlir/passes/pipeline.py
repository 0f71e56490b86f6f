"""Textual pass pipelines that mix vtmlir passes with upstream MLIR passes and pipelines.

Syntax (MLIR's, docs/design.md §5)::

    builtin.module(vt-stats{json=true}, func.func(canonicalize, cse), canonicalize)
    vt-stats,canonicalize                       # bare list: runs on the builtin.module

An element is `name`, `name{options}` or `anchor(nested, pipeline)`. vtmlir passes (see
`vtmlir.passes.all_passes()`) run on the `builtin.module`, so they may only appear at the top level
of the pipeline. Everything else is handed to MLIR's own pipeline parser, which validates upstream
pass names and options. The result is ONE `PassManager`: upstream chunks are added as text, vtmlir
passes as Python passes, in order, so IR printing, verification and timing cover them all.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from torch_mlir import ir, passmanager

from ..errors import VtmlirError, capture_native_stderr, format_diagnostic, format_location, severity_name
from . import registry

ROOT_ANCHOR = "builtin.module"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


@dataclass
class PassEntry:
    """One pass of a pipeline: `name` or `name{options}`; `instance` is set for vtmlir passes."""

    name: str
    options: str | None
    offset: int
    instance: registry.Pass | None = None

    def text(self) -> str:
        if self.instance is not None:
            return self.instance.pipeline_text()
        return self.name if self.options is None else f"{self.name}{{{self.options}}}"


@dataclass
class NestedPipeline:
    """`anchor(elements)`: a pipeline nested on ops named `anchor` (upstream passes only)."""

    anchor: str
    elements: list
    offset: int

    def text(self) -> str:
        return f"{self.anchor}({','.join(e.text() for e in self.elements)})"


@dataclass
class Pipeline:
    """A parsed pipeline anchored on `builtin.module`."""

    elements: list = field(default_factory=list)
    source: str = ""
    implicit_nesting: bool = False

    def text(self) -> str:
        return f"{ROOT_ANCHOR}({','.join(e.text() for e in self.elements)})"

    def __str__(self) -> str:
        return self.text()

    @property
    def vtmlir_passes(self) -> list[registry.Pass]:
        return [e.instance for e in self.elements if isinstance(e, PassEntry) and e.instance is not None]

    def to_pass_manager(
        self, context: ir.Context | None = None, results: PipelineResults | None = None
    ) -> passmanager.PassManager:
        """Build the one `PassManager` running this pipeline (validates upstream passes); each vtmlir
        pass's result is appended to `results` when given."""
        ctx = context or _current_or_new_context()
        pm = passmanager.PassManager(ROOT_ANCHOR, context=ctx)
        for element in self.elements:
            if isinstance(element, PassEntry) and element.instance is not None:
                inst = element.instance
                run = inst._run_in_pass_manager if results is None else results.recorder(inst)
                pm.add(
                    run,
                    name=type(inst).__name__,
                    argument=inst.pipeline_text(),
                    description=inst.summary,
                )
            else:
                _add_upstream(pm, element, self)
        return pm


@dataclass(frozen=True)
class PassResult:
    """What one run of a vtmlir pass returned (`report`: its report object, None if it has none)."""

    name: str
    report: Any


class PipelineResults(list):
    """The results of the vtmlir passes of one `run_pipeline`, in the order they ran (a pass that
    runs twice appears twice). Passes keep no results themselves: this is how they reach a caller."""

    def recorder(self, instance: registry.Pass):
        """The callable `PassManager.add` runs for `instance`: it runs the pass and records its result."""

        def run(op, external_pass):
            self.append(PassResult(instance.name, instance._run_in_pass_manager(op, external_pass)))

        return run

    def report(self, name: str):
        """The report of the last run of pass `name` (a `VtmlirError` if it did not run)."""
        for result in reversed(self):
            if result.name == name:
                return result.report
        raise VtmlirError(f"error: pass '{name}' did not run in this pipeline")

    def reports(self, name: str) -> list:
        """The reports of every run of pass `name`, in order."""
        return [r.report for r in self if r.name == name]


# -- parsing -------------------------------------------------------------------------------------


def parse_pipeline(text: str, *, implicit_nesting: bool = False, validate: bool = True) -> Pipeline:
    """Parse `text` into a `Pipeline`; errors are `VtmlirError`s pointing into the text.

    `implicit_nesting` (used for `vt-opt --<pass>` flags, like mlir-opt) nests an upstream pass that
    only runs on e.g. `func.func` under that op instead of failing. With `validate`, upstream names
    and options are checked by building a PassManager.
    """
    parser = _Parser(text)
    elements = parser.parse()
    if len(elements) == 1 and isinstance(elements[0], NestedPipeline) and elements[0].anchor == ROOT_ANCHOR:
        elements = elements[0].elements
    pipeline = Pipeline(elements, text, implicit_nesting)
    _resolve_vtmlir_passes(pipeline, elements, nested_under=None)
    if validate:
        with _current_or_new_context():
            pipeline.to_pass_manager()
    return pipeline


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, message: str, pos: int | None = None) -> VtmlirError:
        return pipeline_error(self.text, self.pos if pos is None else pos, message)

    def skip_ws(self):
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def parse(self) -> list:
        self.skip_ws()
        if self.pos >= len(self.text):
            return []
        elements = self.parse_list()
        self.skip_ws()
        if self.pos < len(self.text):
            if self.text[self.pos] == ")":
                raise self.error("encountered extra closing ')' in pass pipeline")
            raise self.error(f"expected ',' or end of pass pipeline, found '{self.text[self.pos]}'")
        return elements

    def parse_list(self) -> list:
        elements = [self.parse_element()]
        while True:
            self.skip_ws()
            if self.pos < len(self.text) and self.text[self.pos] == ",":
                self.pos += 1
                elements.append(self.parse_element())
            else:
                return elements

    def parse_element(self):
        self.skip_ws()
        start = self.pos
        m = _IDENT.match(self.text, self.pos)
        if not m:
            found = self.text[self.pos] if self.pos < len(self.text) else "end of pipeline"
            raise self.error(f"expected a pass or op name, found '{found}'")
        name = m.group()
        self.pos = m.end()
        self.skip_ws()
        if self.pos < len(self.text) and self.text[self.pos] == "{":
            return PassEntry(name, self.parse_options(), start)
        if self.pos < len(self.text) and self.text[self.pos] == "(":
            open_pos = self.pos
            self.pos += 1
            self.skip_ws()
            elements = []
            if self.pos < len(self.text) and self.text[self.pos] != ")":
                elements = self.parse_list()
            self.skip_ws()
            if self.pos >= len(self.text) or self.text[self.pos] != ")":
                raise self.error("encountered unbalanced parentheses while parsing pipeline", open_pos)
            self.pos += 1
            return NestedPipeline(name, elements, start)
        return PassEntry(name, None, start)

    def parse_options(self) -> str:
        open_pos = self.pos
        depth, quote = 0, None
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if quote:
                if ch == "\\":
                    self.pos += 1
                elif ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    self.pos += 1
                    return self.text[open_pos + 1 : self.pos - 1]
            self.pos += 1
        raise self.error("missing '}' closing the pass options", open_pos)


def _resolve_vtmlir_passes(pipeline: Pipeline, elements: list, nested_under: str | None) -> None:
    for element in elements:
        if isinstance(element, NestedPipeline):
            _resolve_vtmlir_passes(pipeline, element.elements, element.anchor)
        elif registry.is_registered(element.name):
            pass_cls = registry.get_pass(element.name)
            if nested_under is not None:
                raise pipeline_error(
                    pipeline.source,
                    element.offset,
                    f"vtmlir pass '{element.name}' runs on '{ROOT_ANCHOR}' and cannot be nested under "
                    f"'{nested_under}'; move it to the top level of the pipeline",
                )
            try:
                element.instance = pass_cls.from_options(element.options)
            except VtmlirError as err:
                raise pipeline_error(pipeline.source, element.offset, _strip_error(str(err))) from None


# -- upstream chunks -----------------------------------------------------------------------------

_MLIR_POS = re.compile(r"MLIR Textual PassPipeline Parser:(\d+):(\d+): error: ([^\n]*)")
_NEST = re.compile(r"Can't add pass '[^']*' restricted to '([^']+)' on a PassManager intended to run on '([^']+)'")
_FAILED_ADD = re.compile(r"failed to add `([^`]*)` with options `([^`]*)`")


def _add_upstream(pm: passmanager.PassManager, element, pipeline: Pipeline) -> None:
    chunk = element.text()
    ok, message = _try_add(pm, chunk)
    if ok:
        return
    nest = _NEST.search(message)
    if nest and pipeline.implicit_nesting and isinstance(element, PassEntry):
        ok, message = _try_add(pm, f"{nest.group(1)}({chunk})")
        if ok:
            return
        nest = _NEST.search(message)
    offset = element.offset
    name = re.search(r"'([^']*)' does not refer to a registered pass", message) or _FAILED_ADD.search(message)
    culprit = _find_entry(element, name.group(1)) if name else None
    if culprit is not None:
        offset = culprit.offset
    raise pipeline_error(pipeline.source, offset, _reword_upstream_error(message, element, nest), chunk)


def _find_entry(element, name: str):
    """The first pass entry called `name` in `element` (for pointing errors at nested passes)."""
    if isinstance(element, PassEntry):
        return element if element.name == name else None
    for child in element.elements:
        found = _find_entry(child, name)
        if found is not None:
            return found
    return None


def _try_add(pm, chunk: str) -> tuple[bool, str]:
    with capture_native_stderr() as captured:
        try:
            pm.add(chunk)
            return True, ""
        except ValueError as err:
            message = str(err)
    return False, (captured[0] + "\n" + message).strip() if captured else message


def _reword_upstream_error(message: str, element, nest) -> str:
    m = _MLIR_POS.search(message)
    if m:
        text = m.group(3)
        if "does not refer to a registered pass or pass pipeline" in text:
            name = re.search(r"'([^']*)'", text)
            name = name.group(1) if name else element.name
            return (
                f"'{name}' does not refer to a registered pass or pass pipeline "
                "(neither a vtmlir pass, see `vt-opt --list-passes`, nor an upstream MLIR one)"
            )
        return text
    if nest:
        return (
            f"pass '{element.name}' runs on '{nest.group(1)}' ops, not on '{nest.group(2)}': nest it, "
            f"as in '{nest.group(1)}({element.text()})'"
        )
    failed = _FAILED_ADD.search(message)
    if failed:
        detail = message[: failed.start()].strip()
        detail = re.sub(r"^<Pass-Options-Parser>:\s*", "", detail)
        detail = re.sub(r"^:\s*", "", detail).replace("\n", " ").strip()
        detail = f": {detail}" if detail else ""
        return f"invalid options '{failed.group(2)}' for pass '{failed.group(1)}'{detail}"
    return message.strip().replace("\n", " ")


# -- errors --------------------------------------------------------------------------------------


def pipeline_error(source: str, offset: int, message: str, _chunk: str | None = None) -> VtmlirError:
    """An mlir-style error pointing at `offset` in the pipeline text, with the line and a caret."""
    line_start = source.rfind("\n", 0, offset) + 1
    line_end = source.find("\n", offset)
    line_end = len(source) if line_end < 0 else line_end
    line_no = source.count("\n", 0, offset) + 1
    col = offset - line_start + 1
    line = source[line_start:line_end]
    return VtmlirError(f"<pass-pipeline>:{line_no}:{col}: error: {message}\n{line}\n{' ' * (col - 1)}^")


def _strip_error(message: str) -> str:
    return message[len("error: ") :] if message.startswith("error: ") else message


def _current_or_new_context() -> ir.Context:
    try:
        current = ir.Context.current
    except ValueError:
        current = None
    return current if current is not None else ir.Context()


# -- running -------------------------------------------------------------------------------------


def run_pipeline(
    module,
    pipeline: str | Pipeline,
    print_ir_after_all: bool = False,
    *,
    print_debuginfo: bool = False,
    print_generic: bool = False,
    print_module_scope: bool = False,
    verify_each: bool = True,
    implicit_nesting: bool = False,
    what: str | None = None,
) -> PipelineResults:
    """Run a (mixed) pipeline on `module` (an `ir.Module` or its `builtin.module` operation) in place;
    return the results of its vtmlir passes (`PipelineResults`).

    Raises a `VtmlirError` listing the diagnostics (`file:line:col: error: ...`) when a pass fails;
    `what` (e.g. "bufferizing") is added as a note saying which step of vtmlir ran the pipeline.
    `print_ir_after_all` dumps the IR to stderr after every pass, like `--mlir-print-ir-after-all`.
    """
    op = module.operation if isinstance(module, ir.Module) else module
    if hasattr(op, "operation"):
        op = op.operation
    if op.name != ROOT_ANCHOR:
        raise VtmlirError(f"error: pass pipelines run on '{ROOT_ANCHOR}', got '{op.name}'")
    with op.context:
        if isinstance(pipeline, str):
            pipeline = parse_pipeline(pipeline, implicit_nesting=implicit_nesting, validate=False)
        results = PipelineResults()
        pm = pipeline.to_pass_manager(op.context, results)
        if not verify_each:
            pm.enable_verifier(False)
        if print_ir_after_all:
            if print_module_scope:
                op.context.enable_multithreading(False)
            pm.enable_ir_printing(
                print_after_all=True,
                print_module_scope=print_module_scope,
                enable_debug_info=print_debuginfo,
                print_generic_op_form=print_generic,
            )
        sys.stdout.flush()
        sys.stderr.flush()
        # With the context's `emit_error_diagnostics` on (vt-opt sets it), errors reach the handlers
        # instead of the MLIRError: collect them here, so the error this raises carries them (a
        # nested pipeline's error was printed by vt-opt's handler, and this error said "failed
        # without reporting why": fuzz seed 1800 case 1403).
        errors: list[str] = []

        def collect(diag):
            if severity_name(diag) != "error":
                return False
            errors.append(format_diagnostic(diag))
            return True

        handle = op.context.attach_diagnostic_handler(collect)
        try:
            pm.run(op)
        except ir.MLIRError as err:
            where = format_location(op.location, "<module>")
            lines = [format_diagnostic(d) for d in err.error_diagnostics] or errors or [
                f"{where}: error: a pass of '{pipeline.text()}' failed without reporting why ({err.message})"]
            if what:
                lines.append(f"note: while {what}")
            raise VtmlirError("\n".join(lines)) from None
        finally:
            handle.detach()
            sys.stderr.flush()
    return results
