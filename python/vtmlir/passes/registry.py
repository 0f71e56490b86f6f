"""vtmlir passes: the `Pass` base class, typed pass options, and the registry of pass names.

Writing a pass (one module per pass, named after it, docs/design.md §5)::

    from vtmlir.passes.registry import Option, Pass, register_pass, report_option

    @register_pass
    class EliminateDataMovement(Pass):
        name = "vt-eliminate-data-movement"          # `area-verb-object`, binding for users
        summary = "Replace data-movement ops by virtual tensors"
        description = "Longer text shown by `vt-opt --list-passes` (optional)."
        options = (
            Option("max-depth", int, 8, "longest chain of views to fold"),
            report_option("one line per rewrite"),
        )

        def run(self, module):                         # module: the builtin.module ir.Operation
            ...                                        # self.max_depth, self.report
            self.emit_error(op, "cannot ...")          # error diagnostic + pass failure
            self.write_report(module, text)            # report=PATH, '-' stdout, '' nowhere
            return report                              # the caller's result (see run_pipeline)

then add one line to `_BUILTIN_PASSES` below (name → module). Modules are imported only when a pass
is asked for by name, so `vt-opt` starts without importing every pass (or torch).

Options are written like MLIR pass options, `vt-stats{json=true report=stats.txt}`: space-separated
`key=value`; a bare `key` sets a bool option to true; list options take `1,2,3` (or `{1,2,3}`).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import traceback
from dataclasses import dataclass
from typing import Any, ClassVar

from torch_mlir import ir

from ..errors import LocatedError, VtmlirError

# Pass name -> module that defines (and registers) it. The one place passes are listed; imported lazily.
_BUILTIN_PASSES: dict[str, str] = {
    "vt-stats": "vtmlir.passes.vt_stats",
    # VTC (python/vtmlir/vtc, docs/vtc.md).
    "vt-build-vtog": "vtmlir.vtc.build_vtog",
    "vt-eliminate-data-movement": "vtmlir.vtc.eliminate_data_movement",
    "vt-lower-views": "vtmlir.vtc.lower_views",
    # VTensor layouts (python/vtmlir/layouts, docs/layouts.md).
    "layout-resolve": "vtmlir.layouts.resolve",
    "layout-select-ilp": "vtmlir.layouts.select_ilp",
    "layout-hoist": "vtmlir.layouts.hoist",
    "layout-materialize": "vtmlir.layouts.materialize",
    # Code generation (the pipelines of vtmlir.backend, mirrored in the top-level passes/ folder).
    "memref-copy-to-linalg": "vtmlir.passes.memref_copy_to_linalg",
    "memref-dealloc-at-last-use": "vtmlir.passes.memref_dealloc_at_last_use",
    "memref-elide-temporary-copies": "vtmlir.passes.memref_elide_temporary_copies",
    "copy-updated-arguments": "vtmlir.passes.copy_updated_arguments",
    "drop-donated-results": "vtmlir.passes.drop_donated_results",
    "memref-distinct-returned-buffers": "vtmlir.passes.memref_distinct_returned_buffers",
    "unshare-fill-inits": "vtmlir.passes.unshare_fill_inits",
    "convert-tm-tensor-to-scf": "vtmlir.passes.convert_tm_tensor_to_scf",
    "gpu-strip-runtime-asserts": "vtmlir.passes.gpu_strip_runtime_asserts",
    "gpu-wrap-serial-code": "vtmlir.passes.gpu_wrap_serial_code",
    # TeMCO (python/vtmlir/temco, docs/temco.md).
    "temco-decompose": "vtmlir.temco.decompose",
    "temco-analyze-peak-memory": "vtmlir.temco.analyze_peak_memory",
    "temco-remat-skip": "vtmlir.temco.remat_skip",
    "subbyte-pack": "vtmlir.lowbit.subbyte_pack",  # Tilus (python/vtmlir/lowbit, docs/lowbit.md)
    "subbyte-lower": "vtmlir.lowbit.subbyte_lower",
    "dvm-fuse": "vtmlir.dvm.fuse",  # DVM (python/vtmlir/dvm, docs/dvm.md)
    "temco-fuse-activation": "vtmlir.temco.fuse_activation",
    "gpu-sequentialize-forall": "vtmlir.passes.gpu_sequentialize_forall",
    "memref-alloc-at-first-use": "vtmlir.passes.memref_alloc_at_first_use",
    "temco-pad-in-place": "vtmlir.temco.pad_in_place",
    "temco-push-through-concat": "vtmlir.temco.push_through_concat",
    "temco-gather-to-affine": "vtmlir.temco.gather_to_affine",
    "temco-merge-lconvs": "vtmlir.temco.merge_lconvs",
    "temco-fold-weight-ops": "vtmlir.temco.fold_weight_ops",
    # CPU code generation strategy layer (python/vtmlir/codegen, docs/codegen.md).
    "codegen-inline-casts": "vtmlir.codegen.inline_casts",
    "codegen-split-checks": "vtmlir.codegen.split_checks",
    "codegen-erase-dead-kernels": "vtmlir.codegen.erase_dead_kernels",
    "codegen-order-window-taps": "vtmlir.codegen.order_window_taps",
    "codegen-delinearize-loops": "vtmlir.codegen.delinearize_loops",
    "codegen-split-prologues": "vtmlir.codegen.split_prologues",
    "codegen-split-piece-gathers": "vtmlir.codegen.split_piece_gathers",
    "codegen-split-row-invariants": "vtmlir.codegen.split_row_invariants",
    "codegen-fuse-rows": "vtmlir.codegen.fuse_rows",
    "codegen-split-row-reductions": "vtmlir.codegen.split_row_reductions",
    "codegen-transpose-b-operands": "vtmlir.codegen.transpose_b_operands",
    "codegen-decompose-convolutions": "vtmlir.codegen.decompose_convolutions",
    "codegen-attach-schedule": "vtmlir.codegen.attach_schedule",
    "codegen-hoist-accumulators": "vtmlir.codegen.hoist_accumulators",
    "codegen-reciprocal-divisions": "vtmlir.codegen.reciprocal_divisions",
    "codegen-fold-row-broadcasts": "vtmlir.codegen.fold_row_broadcasts",
    "codegen-streaming-stores": "vtmlir.codegen.streaming_stores",
    "codegen-emulate-bf16": "vtmlir.codegen.emulate_bf16",
    "codegen-fuse-multiply-add": "vtmlir.codegen.fuse_multiply_add",
    "codegen-insert-profile-marks": "vtmlir.codegen.insert_profile_marks",
    "codegen-erase-schedule": "vtmlir.codegen.erase_schedule",
    "codegen-hoist-static-allocas": "vtmlir.codegen.hoist_static_allocas",
    "codegen-plan-workspace": "vtmlir.codegen.plan_workspace",
    "codegen-outline-kernels": "vtmlir.codegen.outline_kernels",
    "codegen-drop-transfer-unit-dims": "vtmlir.codegen.drop_transfer_unit_dims",
    "codegen-keep-strided-transfer-views": "vtmlir.codegen.keep_strided_transfer_views",
    "codegen-trim-window-inputs": "vtmlir.codegen.trim_window_inputs",
    # GPU schedules of the same layer (python/vtmlir/codegen/gpu, docs/codegen_gpu.md).
    "subbyte-cuda-kernels": "vtmlir.lowbit.subbyte_cuda_kernels",
    "codegen-gpu-im2col-convolutions": "vtmlir.codegen.gpu.im2col_convolutions",
    "codegen-gpu-split-prologues": "vtmlir.codegen.gpu.split_prologues",
    "codegen-gpu-split-reductions": "vtmlir.codegen.gpu.split_reductions",
    "codegen-gpu-collapse-sums": "vtmlir.codegen.gpu.collapse_sums",
    "codegen-gpu-collapse-contraction-loops": "vtmlir.codegen.gpu.collapse_contraction_loops",
    "codegen-gpu-wgmma-contractions": "vtmlir.codegen.gpu.wgmma_contractions",
    "codegen-gpu-pad-contractions": "vtmlir.codegen.gpu.pad_contractions",
    "codegen-gpu-attach-schedule": "vtmlir.codegen.gpu.attach_schedule",
    "codegen-gpu-sink-workgroup-buffers": "vtmlir.codegen.gpu.sink_workgroup_buffers",
    "codegen-gpu-workgroup-globals": "vtmlir.codegen.gpu.workgroup_globals",
    "codegen-gpu-sink-constants": "vtmlir.codegen.gpu.sink_constants",
    "codegen-gpu-sync-epilogues": "vtmlir.codegen.gpu.sync_epilogues",
    "codegen-gpu-eliminate-barriers": "vtmlir.codegen.gpu.eliminate_barriers",
    "codegen-gpu-outline-kernels": "vtmlir.codegen.gpu.outline_kernels",
    "codegen-gpu-convert-mma": "vtmlir.codegen.gpu.convert_mma",
    "codegen-gpu-reduce-rows": "vtmlir.codegen.gpu.reduce_rows",
    "codegen-gpu-drop-unit-dims": "vtmlir.codegen.gpu.drop_unit_dims",
    "codegen-approximate-math": "vtmlir.codegen.approximate_math",
    # The default optimisation pipeline (python/vtmlir/optimize.py, docs/pipeline.md).
    "vtmlir-default": "vtmlir.vtmlir_default",
}

_REGISTRY: dict[str, type[Pass]] = {}

OPTION_TYPES = (bool, int, float, str, list[int], list[str])


class PassFailure(LocatedError):
    """Raised inside `Pass.run` to fail the pass with an error diagnostic at `location` (or the module)."""


@dataclass(frozen=True)
class Option:
    """A typed pass option: `name` as written in pipelines (dashes), read as `pass_.<name_with_underscores>`."""

    name: str
    type: Any
    default: Any
    help: str = ""

    def __post_init__(self):
        if self.type not in OPTION_TYPES:
            raise TypeError(f"option '{self.name}': type must be one of bool, int, float, str, list[int], list[str]")

    @property
    def default_value(self):
        """The default as an instance holds it (a fresh list for list options)."""
        return list(self.default) if isinstance(self.default, (list, tuple)) else self.default

    @property
    def attr(self) -> str:
        return self.name.replace("-", "_")

    @property
    def type_name(self) -> str:
        return {bool: "bool", int: "int", float: "float", str: "string", list[int]: "list<int>", list[str]: "list<string>"}[
            self.type
        ]

    def parse(self, text: str, pass_name: str):
        """Convert the textual value `text` to this option's type, or raise a `VtmlirError`."""
        text = _unquote(text.strip())

        def bad(expected: str) -> VtmlirError:
            return VtmlirError(
                f"error: invalid value '{text}' for option '{self.name}' of pass '{pass_name}': expected {expected}"
            )

        if self.type is bool:
            low = text.lower()
            if low in ("", "true", "1", "on", "yes"):
                return True
            if low in ("false", "0", "off", "no"):
                return False
            raise bad("a boolean (true or false)")
        if self.type is int:
            try:
                return int(text, 0)
            except ValueError:
                raise bad("an integer") from None
        if self.type is float:
            try:
                return float(text)
            except ValueError:
                raise bad("a number") from None
        if self.type is str:
            return text
        if text.startswith("{") and text.endswith("}"):
            text = text[1:-1]
        items = [_unquote(i.strip()) for i in _split_top_level(text, ",")] if text.strip() else []
        if self.type == list[int]:
            try:
                return [int(i, 0) for i in items]
            except ValueError:
                raise bad("a comma-separated list of integers") from None
        return items

    def check(self, value, pass_name: str):
        """Validate a Python value given for this option (constructor keyword)."""
        ok = {
            bool: lambda v: isinstance(v, bool),
            int: lambda v: isinstance(v, int) and not isinstance(v, bool),
            float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            str: lambda v: isinstance(v, str),
        }
        if self.type in ok:
            good = ok[self.type](value)
        else:
            elem = int if self.type == list[int] else str
            good = isinstance(value, (list, tuple)) and all(
                isinstance(v, elem) and not isinstance(v, bool) for v in value
            )
        if not good:
            raise VtmlirError(
                f"error: invalid value {value!r} for option '{self.name}' of pass '{pass_name}': expected {self.type_name}"
            )
        if self.type is float:
            return float(value)
        if self.type in (list[int], list[str]):
            return list(value)
        return value

    def format(self, value) -> str:
        if self.type is bool:
            return "true" if value else "false"
        if isinstance(value, list):
            return ",".join(str(v) for v in value)
        text = str(value)
        if self.type is str and (not text or re.search(r"[\s{}\"',]", text)):
            return '"' + text.replace('"', '\\"') + '"'
        return text


def report_option(what: str) -> Option:
    """The one report option of every pass that reports: `report=PATH` writes `what` to a file,
    `report=-` to stdout; empty (the default) writes no report."""
    return Option("report", str, "", f"{what}: write it to this file ('-': stdout; empty: no report)")


class Pass:
    """Base class of vtmlir passes. Subclasses set `name`, `summary`, `options` and implement `run`.

    A pass instance carries its option values as attributes. It runs inside an MLIR PassManager as a
    Python pass on the `builtin.module`, so it mixes with upstream passes, is verified after, and shows
    in `--mlir-print-ir-after-all` dumps.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    description: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, **values):
        self._failed = False
        by_attr = {o.attr: o for o in self.options}
        for key, value in values.items():
            opt = by_attr.get(key.replace("-", "_"))
            if opt is None:
                raise VtmlirError(self._unknown_option_message(key))
            setattr(self, opt.attr, opt.check(value, self.name))
        for opt in self.options:
            if opt.attr not in self.__dict__:
                setattr(self, opt.attr, opt.default_value)

    # -- construction from text ----------------------------------------------------------------
    @classmethod
    def from_options(cls, text: str | None) -> Pass:
        """An instance from MLIR-style option text (`json=true report=x.txt`, without braces)."""
        instance = cls()
        if not text or not text.strip():
            return instance
        by_name = {o.name: o for o in cls.options}
        by_name.update({o.attr: o for o in cls.options})
        for token in _split_top_level(text.strip(), None):
            key, eq, value = token.partition("=")
            key = key.strip()
            opt = by_name.get(key)
            if opt is None:
                raise VtmlirError(cls._unknown_option_message(key))
            if not eq and opt.type is not bool:
                raise VtmlirError(f"error: option '{key}' of pass '{cls.name}' requires a value ({opt.type_name})")
            setattr(instance, opt.attr, opt.parse(value, cls.name) if eq else True)
        return instance

    @classmethod
    def _unknown_option_message(cls, key: str) -> str:
        valid = ", ".join(o.name for o in cls.options) or "none"
        return f"error: no such option '{key}' for pass '{cls.name}' (valid options: {valid})"

    # -- introspection -----------------------------------------------------------------------------
    def option_values(self) -> dict[str, Any]:
        return {o.name: getattr(self, o.attr) for o in self.options}

    def pipeline_text(self) -> str:
        """This pass as a pipeline element, `name{opt=val ...}` listing non-default options."""
        changed = [
            f"{o.name}={o.format(getattr(self, o.attr))}" for o in self.options if getattr(self, o.attr) != o.default_value
        ]
        return f"{self.name}{{{' '.join(changed)}}}" if changed else self.name

    def __repr__(self) -> str:
        return f"<pass {self.pipeline_text()}>"

    # -- running -----------------------------------------------------------------------------------
    def run(self, module) -> Any:
        """Transform or analyse `module` (the `builtin.module` `ir.Operation`) in place; return the
        pass's result (its report object, or None). The instance keeps no result: `run_pipeline`
        hands results to its caller (`PipelineResults`)."""
        raise NotImplementedError(f"pass '{self.name}' does not implement run()")

    def emit_error(self, where, message: str) -> None:
        """Emit an error diagnostic at an op / value / location and make the pass fail."""
        loc = getattr(where, "location", where)
        self._failed = True
        loc.emit_error(message)

    def write_report(self, module, text: str, destination: str | None = None) -> bool:
        """Write a text report to `destination` (default: the pass's `report` option): a file path,
        '-' for stdout, '' for nowhere.

        A file that cannot be written fails the pass with an error at `module`; returns whether the
        report was written (or deliberately dropped).
        """
        destination = self.report if destination is None else destination
        if not destination:
            return True
        if destination == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
            return True
        try:
            with open(destination, "w") as f:
                f.write(text)
        except OSError as err:
            self.emit_error(module, f"{self.name}: cannot write '{destination}': {err.strerror}")
            return False
        return True

    def check_binary_destination(self, module, option: str, destination: str) -> bool:
        """A binary file (a PNG) goes to a path only: '-' is refused with an error (stdout carries
        text: the IR and text reports) rather than written to a file named '-'."""
        if destination == "-":
            self.emit_error(module, f"{self.name}: {option}=- is not supported: {option} writes a binary "
                                    "file, give it a path")
            return False
        return True

    def _run_in_pass_manager(self, op, external_pass) -> Any:
        """Entry point given to `PassManager.add`: runs `run`, turning failures into diagnostics;
        returns what `run` returned (None when it failed)."""
        self._failed = False
        result = None
        try:
            with op.context:  # passes build attributes and types: give them the module's context
                result = self.run(op)
        except LocatedError as failure:  # PassFailure, or bad input a helper found at an op
            loc = failure.location if failure.location is not None else op.location
            message = str(failure) if isinstance(failure, PassFailure) else f"{self.name}: {failure}"
            getattr(loc, "location", loc).emit_error(message)
            self._failed = True
        except VtmlirError as err:
            op.location.emit_error(f"{self.name}: {err}")
            self._failed = True
        except Exception as exc:  # noqa: BLE001 - a bug in the pass: still an MLIR diagnostic, never a traceback
            self._report_internal_error(op, exc)
            self._failed = True
        if self._failed:
            external_pass.signal_pass_failure()
            return None
        return result


    def _report_internal_error(self, module, exc: Exception) -> None:
        """An exception escaping `run` is a bug in the pass; the user still gets an MLIR-style error
        naming the pass and the op it was working on (the innermost `op` of the traceback, which is
        where `file:line:col` comes from), and `VTMLIR_DEBUG=1` prints the Python traceback."""
        culprit = _op_in_traceback(exc.__traceback__)
        target = culprit if culprit is not None else module
        summary = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        if os.environ.get("VTMLIR_DEBUG"):
            traceback.print_exception(exc)
        target.location.emit_error(
            f"vtmlir pass '{self.name}' failed on this '{target.name}' op: internal error: "
            f"{type(exc).__name__}{': ' + summary if summary else ''} (a bug in vtmlir; rerun with "
            "VTMLIR_DEBUG=1 for the Python traceback)"
        )


def _op_in_traceback(tb):
    """The op held in a variable named `op` by the innermost traceback frame that has one (an op a
    pass erased is skipped: the bindings refuse to read its location)."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        value = frame.f_locals.get("op")
        if isinstance(value, (ir.Operation, ir.OpView)):
            try:
                value.location  # noqa: B018 - raises for an op the pass erased
                return value.operation
            except (RuntimeError, ValueError):
                continue
    return None


# -- registry ------------------------------------------------------------------------------------


def register_pass(cls: type[Pass]) -> type[Pass]:
    """Class decorator: make `cls` available by `cls.name` in pipelines and `vt-opt` flags."""
    if not (isinstance(cls, type) and issubclass(cls, Pass)):
        raise TypeError("register_pass expects a subclass of vtmlir.passes.registry.Pass")
    if not re.fullmatch(r"[a-z][a-z0-9-]*", cls.name or ""):
        raise TypeError(f"{cls.__name__}: pass name '{cls.name}' must be lower-case `area-verb-object`")
    if not cls.summary:
        raise TypeError(f"{cls.__name__}: pass '{cls.name}' needs a one-line summary")
    reserved = {n for n in dir(Pass) if not n.startswith("__")}
    for opt in cls.options:
        if opt.attr in reserved:
            raise TypeError(f"{cls.__name__}: option '{opt.name}' clashes with Pass.{opt.attr}")
    existing = _REGISTRY.get(cls.name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise TypeError(f"pass '{cls.name}' registered twice ({existing.__qualname__} and {cls.__qualname__})")
    _REGISTRY[cls.name] = cls
    return cls


def is_registered(name: str) -> bool:
    return name in _REGISTRY or name in _BUILTIN_PASSES


def get_pass(name: str) -> type[Pass]:
    """The pass class registered as `name` (importing its module on first use)."""
    if name not in _REGISTRY and name in _BUILTIN_PASSES:
        importlib.import_module(_BUILTIN_PASSES[name])
    try:
        return _REGISTRY[name]
    except KeyError:
        raise VtmlirError(f"error: '{name}' is not a registered vtmlir pass") from None


def all_passes() -> dict[str, type[Pass]]:
    """Every registered pass by name (imports all pass modules), sorted by name."""
    for name in _BUILTIN_PASSES:
        get_pass(name)
    return dict(sorted(_REGISTRY.items()))


# -- option text helpers -------------------------------------------------------------------------


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1].replace("\\" + text[0], text[0])
    return text


def _split_top_level(text: str, sep: str | None) -> list[str]:
    """Split on `sep` (None: whitespace) outside quotes and braces."""
    parts, current, depth, quote = [], [], 0, None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            current.append(ch)
            if ch == "\\" and i + 1 < len(text):
                current.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            current.append(ch)
        elif ch == "{":
            depth += 1
            current.append(ch)
        elif ch == "}":
            depth -= 1
            current.append(ch)
        elif depth == 0 and ((sep is None and ch.isspace()) or ch == sep):
            if current or sep is not None:
                parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    if quote:
        raise VtmlirError(f"error: unterminated quote in pass options '{text}'")
    if depth != 0:
        raise VtmlirError(f"error: unbalanced braces in pass options '{text}'")
    if current or (sep is not None and parts):
        parts.append("".join(current))
    return [p for p in parts if sep is not None or p]
