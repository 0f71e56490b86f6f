"""Subprocess worker: LLVM-dialect kernels (MLIR text) → LLVM IR → PTX.

Run as `python -m vtmlir.backend.cuda._translate`. It reads one JSON request on stdin and writes one
JSON reply on stdout. It exists because `translate_module_to_llvmir` segfaults on some invalid input
(docs/design.md §6): a crash here ends this process only, and the parent (`vtmlir.backend.cuda.ptx`) turns
it into a `VtmlirError` naming the kernel.

Request:  {"chip": "sm_80", "features": "+ptx80", "libdevice": path or null,
           "kernels": [[name, mlir_text], ...]}
Reply:    {"kernels": {name: {"llvm_ir": text, "ptx": text}}}  or  {"error": message, "kernel": name}
Before each kernel it writes `translating <name>` on stderr, so the parent knows which one crashed.
"""

from __future__ import annotations

import json
import re
import struct
import sys

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import llvm as llvm_dialect

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
ALLOWED_DIALECTS = ("llvm", "nvvm")


def offending_op(root) -> str | None:
    """The first op under `root` (excluded) that is not llvm/nvvm, with its location; or None."""
    found: list[str] = []
    root_op = root.operation

    def visit(op):
        name = op.name
        if op != root_op and name.split(".", 1)[0] not in ALLOWED_DIALECTS:
            found.append(f"'{name}' at {op.location}")
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    root_op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found[0] if found else None


def to_llvm_ir(mlir_text: str) -> str:
    """Parse an llvm/nvvm-only module and translate it to LLVM IR text (raises ValueError on bad input)."""
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = False
        try:
            module = ir.Module.parse(mlir_text)
        except ir.MLIRError as err:
            raise ValueError(f"cannot parse the kernel module: {err}") from None
        bad = offending_op(module)
        if bad:
            raise ValueError(f"op {bad} is not in the LLVM or NVVM dialect; it cannot be translated to LLVM IR")
        return str(llvm_dialect.translate_module_to_llvmir(module.operation))


_LIBDEVICE_CACHE: dict = {}


def _libdevice(path: str):
    """libdevice parsed once per process (it is ~500 KB of bitcode); linked in with preserve=True."""
    import llvmlite.binding as llvm  # deferred: llvmlite is heavy; loaded on first use

    if path not in _LIBDEVICE_CACHE:
        with open(path, "rb") as f:
            lib = llvm.parse_bitcode(f.read())
        lib.triple = NVPTX_TRIPLE
        _LIBDEVICE_CACHE[path] = lib
    return _LIBDEVICE_CACHE[path]


def target_machine(chip: str, features: str):
    import llvmlite.binding as llvm  # deferred: llvmlite is heavy; loaded on first use

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple(NVPTX_TRIPLE)
    return target.create_target_machine(cpu=chip, features=features, opt=3)


_HEX_FLOAT = re.compile(r"\bf0x([0-9A-Fa-f]+)\b")
_DECIMAL = re.compile(r"(?<![\w.%@\"])[-+]?\d+\.\d+e[-+]\d+\b")
_SPLAT = re.compile(r"\bsplat \(([^()]*)\)")
_VECTOR_TYPE = re.compile(r"<(\d+) x \w+>")
_INFINITY = re.compile(r"(?<![\w.%@\"])([-+]?)inf\b")
_LAST_FLOAT_TYPE = re.compile(r"\b(half|bfloat|float|double)\b(?!.*\b(?:half|bfloat|float|double)\b)")


def _sixteen_bit_literal(kind: str, value: float) -> str:
    """`0xH`/`0xR` + the bits of `value` rounded to half / bfloat (round to nearest even)."""
    if kind == "half":
        return f"0xH{int(np.float16(value).view(np.uint16)):04X}"
    bits = int(np.float32(value).view(np.uint32))
    return f"0xR{(bits + 0x7FFF + ((bits >> 16) & 1)) >> 16:04X}"


def legacy_float_literals(llvm_ir: str) -> str:
    """Rewrite float literals of MLIR's LLVM (24) into what llvmlite's older parser reads.

    - `f0x<bits>`: float/double become `0x<16 hex digits of the double>`, half `0xH<bits>`, bfloat
      `0xR<bits>`;
    - decimal half/bfloat/float literals (`9.997550e-02`), which the older parser accepts only when
      exact, become `0xH`/`0xR` bit patterns and, for float, the hex double of the float's value;
      `inf`/`-inf` become the type's bit pattern;
    - vector splats `splat (half 1.0)` become the element list `<half 1.0, ...>` (the length of the
      last vector type before them on the line).
    Which type a literal has is read off the last float type named before it on its line."""

    def rewrite_line(line: str) -> str:
        def type_before(position: int) -> str | None:
            found = _LAST_FLOAT_TYPE.search(line[:position])
            return found.group(1) if found else None

        def hex_literal(match: re.Match) -> str:
            digits = match.group(1)
            if len(digits) == 16:
                return "0x" + digits.upper()
            if len(digits) == 8:
                (value,) = struct.unpack(">f", bytes.fromhex(digits))
                return "0x" + struct.pack(">d", value).hex().upper()
            return ("0xR" if type_before(match.start()) == "bfloat" else "0xH") + digits.upper()

        def decimal_literal(match: re.Match) -> str:
            kind = type_before(match.start())
            if kind in ("half", "bfloat"):
                return _sixteen_bit_literal(kind, float(match.group(0)))
            if kind == "float":
                # LLVM 24 prints the shortest decimal that rounds to the float (4.471500e-02); the
                # older parser wants one the float holds exactly: write the float's value in hex.
                (value,) = struct.unpack(">f", struct.pack(">f", float(match.group(0))))
                return "0x" + struct.pack(">d", value).hex().upper()
            return match.group(0)

        def infinity(match: re.Match) -> str:
            kind = type_before(match.start())
            value = float(match.group(1) + "inf")
            if kind in ("half", "bfloat"):
                return _sixteen_bit_literal(kind, value)
            return "0x" + struct.pack(">d", value).hex().upper()

        def splat(match: re.Match) -> str:
            vectors = _VECTOR_TYPE.findall(line[:match.start()])
            if not vectors:
                return match.group(0)
            return "<" + ", ".join([match.group(1).strip()] * int(vectors[-1])) + ">"

        line = _SPLAT.sub(splat, line)
        line = _HEX_FLOAT.sub(hex_literal, line)
        if "inf" in line:
            line = _INFINITY.sub(infinity, line)
        if "half" in line or "float" in line:   # "float" also finds "bfloat"
            line = _DECIMAL.sub(decimal_literal, line)
        return line

    return "\n".join(rewrite_line(line) for line in llvm_ir.split("\n"))


def check_libdevice_signatures(module, lib) -> None:
    """Every `__nv_*` the kernel declares must have libdevice's own type.

    LLVM links a declaration of another type anyway and ptxas accepts the result: the call goes through
    a prototype of the wrong width and reads garbage on the device (seen on an H100: NVVM's lowering
    of `math.fpowi` with an i64 exponent declared `__nv_powif(float, i64)`, libdevice's takes i32).
    """
    for fn in module.functions:
        if not (fn.is_declaration and fn.name.startswith("__nv_")):
            continue
        try:
            wanted = str(lib.get_function(fn.name).global_value_type)
        except NameError:
            raise ValueError(f"{fn.name} is not a libdevice function") from None
        declared = str(fn.global_value_type)
        if declared != wanted:
            raise ValueError(f"the kernel calls {fn.name} as '{declared}', libdevice defines it as "
                             f"'{wanted}'; the call would read wrong arguments on the device")


def to_ptx(llvm_ir: str, chip: str, features: str, libdevice: str | None) -> str:
    """Link libdevice if needed, internalize it, run O3 for NVPTX and emit PTX."""
    import llvmlite.binding as llvm  # deferred: llvmlite is heavy; loaded on first use

    machine = target_machine(chip, features)

    module = llvm.parse_assembly(legacy_float_literals(llvm_ir))
    module.triple = NVPTX_TRIPLE
    module.data_layout = str(machine.target_data)
    own_functions = {f.name for f in module.functions if not f.is_declaration}
    if "__nv_" in llvm_ir:
        if libdevice is None:
            raise ValueError("the kernel calls libdevice (__nv_*) but libdevice.10.bc was not found "
                             "(install the nvidia-nvvm package)")
        lib = _libdevice(libdevice)
        check_libdevice_signatures(module, lib)
        lib.data_layout = module.data_layout
        module.link_in(lib, preserve=True)
        # Only the kernels stay visible; O3 then drops the unused part of libdevice.
        for fn in module.functions:
            if not fn.is_declaration and fn.name not in own_functions:
                fn.linkage = llvm.Linkage.internal
    module.verify()

    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    unresolved = [f.name for f in module.functions if f.is_declaration and not f.name.startswith("llvm.")]
    if unresolved:
        raise ValueError(f"unresolved external function(s) after linking: {', '.join(sorted(unresolved))}")
    return machine.emit_assembly(module)


def main() -> int:
    request = json.load(sys.stdin)
    reply: dict = {"kernels": {}}
    for name, mlir_text in request["kernels"]:
        print(f"translating {name}", file=sys.stderr, flush=True)
        try:
            llvm_ir = to_llvm_ir(mlir_text)
            ptx = to_ptx(llvm_ir, request["chip"], request["features"], request.get("libdevice"))
        except Exception as err:  # noqa: BLE001 - every failure goes back to the parent as a message
            json.dump({"error": str(err), "kernel": name}, sys.stdout)
            return 2
        reply["kernels"][name] = {"llvm_ir": llvm_ir, "ptx": ptx}
    json.dump(reply, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
