"""Subprocess worker: LLVM-dialect kernels (MLIR text) → LLVM IR → PTX.

Run as `python -m vtmlir.backend.cuda._translate`. It reads one JSON request on stdin and writes one
JSON reply on stdout. It exists because `translate_module_to_llvmir` segfaults on some invalid input
(DESIGN.md §2): a crash here ends this process only, and the parent (`vtmlir.backend.cuda.ptx`) turns
it into a `VtmlirError` naming the kernel.

Request:  {"chip": "sm_80", "features": "+ptx80", "libdevice": path or null,
           "kernels": [[name, mlir_text], ...]}
Reply:    {"kernels": {name: {"llvm_ir": text, "ptx": text}}}  or  {"error": message, "kernel": name}
Before each kernel it writes `translating <name>` on stderr, so the parent knows which one crashed.
"""

from __future__ import annotations

import json
import sys

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
ALLOWED_DIALECTS = ("llvm", "nvvm")


def offending_op(root) -> str | None:
    """The first op under `root` (excluded) that is not llvm/nvvm, with its location; or None."""
    from torch_mlir import ir

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
    from torch_mlir import ir
    from torch_mlir.dialects import llvm as llvm_dialect

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
    import llvmlite.binding as llvm

    if path not in _LIBDEVICE_CACHE:
        with open(path, "rb") as f:
            lib = llvm.parse_bitcode(f.read())
        lib.triple = NVPTX_TRIPLE
        _LIBDEVICE_CACHE[path] = lib
    return _LIBDEVICE_CACHE[path]


def target_machine(chip: str, features: str):
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple(NVPTX_TRIPLE)
    return target.create_target_machine(cpu=chip, features=features, opt=3)


def to_ptx(llvm_ir: str, chip: str, features: str, libdevice: str | None) -> str:
    """Link libdevice if needed, internalize it, run O3 for NVPTX and emit PTX."""
    import llvmlite.binding as llvm

    machine = target_machine(chip, features)

    module = llvm.parse_assembly(llvm_ir)
    module.triple = NVPTX_TRIPLE
    module.data_layout = str(machine.target_data)
    own_functions = {f.name for f in module.functions if not f.is_declaration}
    if "__nv_" in llvm_ir:
        if libdevice is None:
            raise ValueError("the kernel calls libdevice (__nv_*) but libdevice.10.bc was not found "
                             "(install the nvidia-nvvm package)")
        lib = _libdevice(libdevice)
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
