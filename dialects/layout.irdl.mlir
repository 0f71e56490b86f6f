// IRDL of the `layout` dialect, generated from python/vtmlir/dialects/ -- do not edit.
// Regenerate: python -m vtmlir.dialects.write_irdl
// Load into MLIR tools with --irdl-file=<this file>. Op verifiers beyond these
// structural constraints live in Python (see dialects/README.md).
module {
  irdl.dialect @layout {
    irdl.operation @convert {
      %0 = irdl.base "!builtin.tensor"
      irdl.operands(source: %0)
      %1 = irdl.base "#builtin.dictionary"
      %2 = irdl.base "#builtin.dictionary"
      irdl.attributes {"src_layout" = %1, "dst_layout" = %2}
      %3 = irdl.base "!builtin.tensor"
      irdl.results(result: %3)
    }
    irdl.operation @reinterpret {
      %0 = irdl.base "!builtin.tensor"
      irdl.operands(source: %0)
      %1 = irdl.base "#builtin.dictionary"
      %2 = irdl.base "#builtin.dictionary"
      irdl.attributes {"src_layout" = %1, "dst_layout" = %2}
      %3 = irdl.base "!builtin.tensor"
      irdl.results(result: %3)
    }
  }
}
