"""`vt-opt`: vtmlir's `mlir-opt`.

    vt-opt [options] [input.mlir | -]

Reads `.mlir` (a file or stdin), runs a pass pipeline mixing vtmlir passes (`--list-passes`) and
upstream MLIR passes, and prints the result. Passes are given either as one `--pass-pipeline=` or as
flags in command-line order: `--vt-stats="json=true" --canonicalize --cse`. Any `--<name>` that is not a
vt-opt option is taken as a pass name (validated by MLIR), and upstream passes that only run on e.g.
`func.func` are nested implicitly, like mlir-opt does.

Errors are printed the way mlir-opt prints them (`file:line:col: error: ...` with the source line),
exit status 1; command-line problems are `vt-opt: error: ...`, exit 1; a bug in vtmlir is one
`vt-opt: internal error: ...` line, exit 2 (set VTMLIR_DEBUG=1 for the Python traceback).

Design notes:
- Imports are lazy: `--help` needs no MLIR, and nothing here imports torch.
- `--split-input-file`: chunks are parsed with their original line numbers (each chunk is padded with
  the newlines that precede it), so diagnostics and `expected-*` directives refer to the real file.
- Diagnostics reach one handler on the context (`emit_error_diagnostics` on), parse and verifier
  errors included; `--verify-diagnostics` matches them against `expected-*` directives.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from dataclasses import dataclass, field

from torch_mlir import ir

from .. import __version__
from ..context import make_context
from ..diagnostics import Diag, DirectiveError, Source, parse_expected, to_diag, verify_diagnostics
from ..errors import VtmlirError
from ..frontend.source import decode_source, parse_source
from ..passes import all_passes
from ..passes.pipeline import Pipeline, parse_pipeline

PROG = "vt-opt"
DEFAULT_SPLIT_MARKER = "// -----"

USAGE = f"""\
OVERVIEW: vtmlir modular optimizer driver (like mlir-opt)

USAGE: {PROG} [options] [<input file> | -]

OPTIONS:
  --pass-pipeline=<pipeline>   textual pipeline, e.g. 'builtin.module(vt-stats, func.func(canonicalize), cse)'
  --<pass>[=<options>]         add a pass (vtmlir or upstream MLIR), in command-line order,
                               e.g. --vt-stats='json=true' --canonicalize --cse
  --list-passes                list vtmlir passes and their options
  -o <file>                    output file (default: stdout)
  --split-input-file[=<marker>]
                               split the input on '// -----' lines and process each chunk separately
  --verify-diagnostics         check diagnostics against expected-(error|warning|note|remark) directives
  --mlir-print-ir-after-all    print the IR after every pass (to stderr)
  --mlir-print-ir-module-scope print the whole module in IR dumps
  --mlir-print-debuginfo       print locations
  --mlir-print-op-generic      print ops in generic form
  --mlir-timing                report pass timing
  --mlir-disable-threading     run passes single-threaded
  --dump-pass-pipeline         print the pass pipeline before running it
  --verify-each[=<bool>]       verify the IR after each pass (default: true)
  --allow-unregistered-dialect allow ops of unregistered dialects
  --version                    print the vtmlir version
  -h, --help                   print this help
"""

_BOOL_FLAGS = {
    "verify-diagnostics": "verify_diagnostics",
    "mlir-print-ir-after-all": "print_ir_after_all",
    "mlir-print-ir-module-scope": "print_module_scope",
    "mlir-print-debuginfo": "print_debuginfo",
    "mlir-print-op-generic": "print_generic",
    "mlir-timing": "timing",
    "mlir-disable-threading": "disable_threading",
    "dump-pass-pipeline": "dump_pass_pipeline",
    "verify-each": "verify_each",
    "allow-unregistered-dialect": "allow_unregistered",
    "list-passes": "list_passes",
    "help": "help",
    "h": "help",
    "version": "version",
}


class UsageError(Exception):
    """A command-line problem: printed as `vt-opt: error: ...`, exit 1."""


@dataclass
class Options:
    input: str | None = None
    output: str = "-"
    pass_pipeline: str | None = None
    pass_flags: list = field(default_factory=list)  # (flag text, name, options text or None)
    split_marker: str | None = None
    verify_diagnostics: bool = False
    print_ir_after_all: bool = False
    print_module_scope: bool = False
    print_debuginfo: bool = False
    print_generic: bool = False
    timing: bool = False
    disable_threading: bool = False
    dump_pass_pipeline: bool = False
    verify_each: bool = True
    allow_unregistered: bool = False
    list_passes: bool = False
    help: bool = False
    version: bool = False


def _parse_bool(flag: str, value: str) -> bool:
    low = value.lower()
    if low in ("true", "1", "on", "yes", ""):
        return True
    if low in ("false", "0", "off", "no"):
        return False
    raise UsageError(f"invalid value '{value}' for '{flag}': expected true or false")


def parse_args(argv: list[str]) -> Options:
    opts = Options()
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            positional.extend(argv[i:])
            break
        if arg == "-" or not arg.startswith("-"):
            positional.append(arg)
            continue
        body = arg[2:] if arg.startswith("--") else arg[1:]
        key, eq, value = body.partition("=")

        def take_value() -> str:
            nonlocal i
            if eq:
                return value
            if i >= len(argv):
                raise UsageError(f"option '{arg}' requires a value")
            i += 1
            return argv[i - 1]

        if key == "o":
            opts.output = take_value()
        elif key == "pass-pipeline":
            opts.pass_pipeline = take_value()
        elif key == "split-input-file":
            opts.split_marker = value if eq and value else DEFAULT_SPLIT_MARKER
        elif key in _BOOL_FLAGS:
            setattr(opts, _BOOL_FLAGS[key], _parse_bool(arg, value) if eq else True)
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", key):
            opts.pass_flags.append((arg, key, value if eq else None))
        else:
            raise UsageError(f"unknown command line argument '{arg}'; try '{PROG} --help'")
    if len(positional) > 1:
        raise UsageError(f"too many positional arguments: {' '.join(positional)} (expected one input file)")
    opts.input = positional[0] if positional else "-"
    if opts.pass_pipeline is not None and opts.pass_flags:
        raise UsageError(
            f"'--pass-pipeline' can't be used with individual pass options ({opts.pass_flags[0][0]})"
        )
    return opts


# -- pass listing --------------------------------------------------------------------------------


def list_passes_text() -> str:
    lines = ["Available vtmlir passes (run on builtin.module):"]
    for name, cls in all_passes().items():
        lines.append(f"  --{name:<30} {cls.summary}")
        for opt in cls.options:
            default = opt.format(opt.default)
            lines.append(f"      {opt.name + '=<' + opt.type_name + '>':<30} {opt.help} (default: {default})")
    lines += [
        "",
        "Options are given as --<pass>='opt=value other' or in a pipeline as <pass>{opt=value other}.",
        "Upstream MLIR passes and pass pipelines (e.g. --canonicalize, --cse, --convert-linalg-to-loops,",
        "'func.func(canonicalize)') are accepted too; see the MLIR pass documentation for those.",
    ]
    return "\n".join(lines) + "\n"


# -- pipeline --------------------------------------------------------------------------------------


def build_pipeline(opts: Options):
    if opts.pass_pipeline is not None:
        return parse_pipeline(opts.pass_pipeline)
    elements = []
    for flag, name, options in opts.pass_flags:
        text = name if options is None else f"{name}{{{options}}}"
        try:
            elements.extend(parse_pipeline(text, implicit_nesting=True).elements)
        except VtmlirError as err:
            first = str(err).splitlines()[0]
            message = first.split(" error: ", 1)[-1]
            if "does not refer to a registered pass" in message:
                raise UsageError(
                    f"unknown command line option or pass '{flag}' "
                    f"(see '{PROG} --help' and '{PROG} --list-passes')"
                ) from None
            raise UsageError(f"{flag}: {message}") from None
    return Pipeline(elements, ",".join(e.text() for e in elements), implicit_nesting=True)


# -- processing ------------------------------------------------------------------------------------


def split_chunks(text: str, marker: str | None) -> list[tuple[str, int]]:
    """(chunk text padded to its original line numbers, first line) per chunk."""
    if marker is None:
        return [(text, 1)]
    lines = text.split("\n")
    chunks, start = [], 0
    for index, line in enumerate(lines):
        if line.strip().startswith(marker) and line.strip()[len(marker) :].strip("-").strip() == "":
            chunks.append((start, index))
            start = index + 1
    chunks.append((start, len(lines)))
    return [("\n" * s + "\n".join(lines[s:e]), s + 1) for s, e in chunks]


class Driver:
    def __init__(self, opts: Options):
        self.opts = opts
        self.pipeline = None

    def run(self) -> int:
        opts = self.opts
        name, text = self._read_input()
        source = Source(name, text)

        self.pipeline = build_pipeline(opts) if (opts.pass_pipeline is not None or opts.pass_flags) else None
        if opts.dump_pass_pipeline and self.pipeline is not None:
            sys.stderr.write(f"Pass Manager with {len(self.pipeline.elements)} passes:\n{self.pipeline.text()}\n")

        outputs: list[str] = []
        ok = True
        for chunk, _first_line in split_chunks(text, opts.split_marker):
            ctx = make_context()
            if opts.allow_unregistered:
                ctx.allow_unregistered_dialects = True
            if opts.disable_threading or (opts.print_ir_after_all and opts.print_module_scope):
                ctx.enable_multithreading(False)
            chunk_ok, out = self._process_chunk(chunk, source, ctx, ir, parse_source)
            ok &= chunk_ok
            if out is not None:
                outputs.append(out)
        result = "// -----\n".join(outputs)
        self._write_output(result, ok)
        return 0 if ok else 1

    def _read_input(self) -> tuple[str, str]:
        path = self.opts.input
        if path == "-":
            return "<stdin>", decode_source(sys.stdin.buffer.read(), "<stdin>")
        try:
            with open(path, "rb") as f:
                return path, decode_source(f.read(), path)
        except OSError as err:
            raise UsageError(f"could not open input file '{path}': {err.strerror}") from None

    def _write_output(self, text: str, ok: bool) -> None:
        path = self.opts.output
        if path == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        if not ok:
            return  # like mlir-opt: the output file is only kept on success
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as err:
            raise UsageError(f"could not open output file '{path}': {err.strerror}") from None

    def _process_chunk(self, chunk: str, source: Source, ctx, ir, parse_source) -> tuple[bool, str | None]:
        opts = self.opts
        diags: list[Diag] = []

        def handler(d):
            diag = to_diag(d)
            diags.append(diag)
            if not opts.verify_diagnostics and not buffering:
                sys.stderr.write(source.render_diag(diag) + "\n")
                sys.stderr.flush()
            return True

        buffering = True
        ctx.emit_error_diagnostics = True
        handle = ctx.attach_diagnostic_handler(handler)
        try:
            # Parsing cannot crash the process: see vtmlir.frontend.source.parse_source.
            parsed, parse_diags = parse_source(chunk, source.name, ctx, allow_unregistered=opts.allow_unregistered)
            diags.extend(parse_diags)
            module = parsed.operation if parsed is not None else None
            buffering = False
            if not opts.verify_diagnostics:
                for d in diags:
                    sys.stderr.write(source.render_diag(d) + "\n")
                sys.stderr.flush()

            failed = module is None
            if module is not None and self.pipeline is not None:
                failed = not self._run_passes(module, ctx, ir, diags, source)

            output = None
            if not failed:
                output = module.get_asm(
                    enable_debug_info=opts.print_debuginfo,
                    print_generic_op_form=opts.print_generic,
                    assume_verified=True,
                )
                if not output.endswith("\n"):
                    output += "\n"
            if opts.verify_diagnostics:
                try:
                    expected = parse_expected(chunk)
                except DirectiveError as err:
                    sys.stderr.write(source.render("error", str(err), source.name, err.line, err.col) + "\n")
                    return False, output
                problems = verify_diagnostics(diags, expected, source)
                for p in problems:
                    sys.stderr.write(p + "\n")
                sys.stderr.flush()
                return not problems, output
            if failed and not any(d.severity == "error" for d in diags):
                what = f"a pass of '{self.pipeline.text()}'" if module is not None and self.pipeline else "parsing"
                sys.stderr.write(f"{source.name}: error: {what} failed without reporting why\n")
            return not failed, output
        finally:
            handle.detach()

    def _run_passes(self, module, ctx, ir, diags, source) -> bool:
        opts = self.opts
        pm = self.pipeline.to_pass_manager(ctx)
        if not opts.verify_each:
            pm.enable_verifier(False)
        if opts.print_ir_after_all:
            pm.enable_ir_printing(
                print_after_all=True,
                print_module_scope=opts.print_module_scope,
                enable_debug_info=opts.print_debuginfo,
                print_generic_op_form=opts.print_generic,
            )
        if opts.timing:
            pm.enable_timing()
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pm.run(module)
            return True
        except ir.MLIRError:
            return False
        finally:
            sys.stderr.flush()
            del pm  # timing reports print when the pass manager goes away


# -- entry point -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        opts = parse_args(argv)
        if opts.help:
            sys.stdout.write(USAGE)
            return 0
        if opts.version:
            sys.stdout.write(f"vt-opt (vtmlir) {__version__}\n")
            return 0
        if opts.list_passes:
            sys.stdout.write(list_passes_text())
            return 0
        return Driver(opts).run()
    except UsageError as err:
        _stderr(f"{PROG}: error: {err}")
        return 1
    except KeyboardInterrupt:
        _stderr(f"{PROG}: interrupted")
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # noqa: BLE001 - the one place every failure ends up
        if isinstance(exc, VtmlirError):
            text = str(exc)
            _stderr(text if re.match(r"^\S*:\d+:\d+: |^[^\s:]+: error: ", text) else f"{PROG}: {text}")
            return 1
        if os.environ.get("VTMLIR_DEBUG"):
            traceback.print_exc()
        notes = "; ".join(getattr(exc, "__notes__", []) or [])
        where = f" ({notes})" if notes else ""
        summary = str(exc).splitlines()[0] if str(exc) else ""
        _stderr(
            f"{PROG}: internal error: {type(exc).__name__}: {summary}{where} "
            "-- this is a bug in vtmlir; rerun with VTMLIR_DEBUG=1 for the Python traceback"
        )
        return 2


def _stderr(text: str) -> None:
    try:
        sys.stderr.write(text.rstrip("\n") + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
