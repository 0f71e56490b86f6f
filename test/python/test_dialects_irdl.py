"""dialects/{vt,layout,lowbit}.irdl.mlir stay in sync with the Python definitions and load on their own."""

from pathlib import Path

import pytest
from torch_mlir import ir
from torch_mlir.dialects import irdl

from vtmlir.dialects import ALL_DIALECTS, irdl_text
from vtmlir.dialects.write_irdl import irdl_path

REPO = Path(__file__).resolve().parents[2]
REGENERATE = "python -m vtmlir.dialects.write_irdl"


@pytest.mark.parametrize("dialect", ALL_DIALECTS, ids=lambda d: d.DIALECT_NAMESPACE)
def test_irdl_file_matches_python_definition(dialect):
    path = irdl_path(dialect, REPO / "dialects")
    assert path.exists(), f"{path} is missing; run: {REGENERATE}"
    assert path.read_text() == irdl_text(dialect), (
        f"{path.relative_to(REPO)} has drifted from python/vtmlir/dialects/; run: {REGENERATE}")


def test_irdl_files_load_without_python_dialects():
    """Another MLIR tool (here: a bare context, no vtmlir) can load the files and parse our IR."""
    with ir.Context() as ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = False
        for dialect in ALL_DIALECTS:
            module = ir.Module.parse(irdl_path(dialect, REPO / "dialects").read_text())
            irdl.load_dialects(module)
        assert ctx.is_dialect_loaded("vt") and ctx.is_dialect_loaded("layout")
        for name in ("vt/ops.mlir", "vt/float.mlir", "layout/ops.mlir", "layout/register.mlir", "lowbit/ops.mlir"):
            text = (REPO / "test" / "Dialect" / name).read_text()
            for chunk in text.split("// -----"):
                ir.Module.parse(chunk).operation.verify()
        # Structural constraints hold: a vt.view without its mapping is rejected.
        with pytest.raises(ir.MLIRError, match="mapping"):
            ir.Module.parse("""
              func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
                %0 = "vt.view"(%a) {operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>}
                    : (tensor<4xf32>) -> tensor<4xf32>
                return %0 : tensor<4xf32>
              }""")
