// IRDL of the `lowbit` dialect, generated from python/vtmlir/dialects/ -- do not edit.
// Regenerate: python -m vtmlir.dialects.write_irdl
// Load into MLIR tools with --irdl-file=<this file>. Op verifiers beyond these
// structural constraints live in Python (see dialects/README.md).
module {
  irdl.dialect @lowbit {
    irdl.operation @unpack {
      %0 = irdl.base "!builtin.tensor"
      irdl.operands(packed: %0)
      %1 = irdl.base "#builtin.string"
      %2 = irdl.base "#builtin.affine_map"
      %3 = irdl.base "#builtin.string"
      irdl.attributes {"dtype" = %1, "position" = %2, "tile_layout" = %3}
      %4 = irdl.base "!builtin.tensor"
      irdl.results(result: %4)
    }
  }
}
