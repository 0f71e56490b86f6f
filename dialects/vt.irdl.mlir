// IRDL of the `vt` dialect, generated from python/vtmlir/dialects/ -- do not edit.
// Regenerate: python -m vtmlir.dialects.write_irdl
// Load into MLIR tools with --irdl-file=<this file>. Op verifiers beyond these
// structural constraints live in Python (see dialects/README.md).
module {
  irdl.dialect @vt {
    irdl.type @float {
      %0 = irdl.base "#builtin.integer"
      %1 = irdl.base "#builtin.integer"
      %2 = irdl.base "#builtin.string"
      irdl.parameters(exponent: %0, mantissa: %1, specials: %2)
    }
    irdl.operation @view {
      %0 = irdl.base "!builtin.tensor"
      %1 = irdl.base "!builtin.tensor"
      %2 = irdl.base "!builtin.tensor"
      %3 = irdl.base "!builtin.tensor"
      %4 = irdl.base "!builtin.tensor"
      %5 = irdl.base "!builtin.tensor"
      %6 = irdl.base "!builtin.tensor"
      %7 = irdl.base "!builtin.tensor"
      irdl.operands(sources_0: variadic %0, sources_1: variadic %1, sources_2: variadic %2, sources_3: variadic %3, sources_4: variadic %4, sources_5: variadic %5, sources_6: variadic %6, sources_7: variadic %7)
      %8 = irdl.base "#builtin.array"
      irdl.attributes {"mapping" = %8}
      %9 = irdl.base "!builtin.tensor"
      irdl.results(result: %9)
    }
    irdl.operation @store_into {
      %0 = irdl.base "!builtin.tensor"
      %1 = irdl.base "!builtin.tensor"
      %2 = irdl.base "!builtin.tensor"
      %3 = irdl.base "!builtin.tensor"
      %4 = irdl.base "!builtin.tensor"
      %5 = irdl.base "!builtin.tensor"
      %6 = irdl.base "!builtin.tensor"
      %7 = irdl.base "!builtin.tensor"
      %8 = irdl.base "!builtin.tensor"
      irdl.operands(value: %0, dests_0: variadic %1, dests_1: variadic %2, dests_2: variadic %3, dests_3: variadic %4, dests_4: variadic %5, dests_5: variadic %6, dests_6: variadic %7, dests_7: variadic %8)
      %9 = irdl.base "#builtin.array"
      irdl.attributes {"mapping" = %9}
      %10 = irdl.base "!builtin.tensor"
      %11 = irdl.base "!builtin.tensor"
      %12 = irdl.base "!builtin.tensor"
      %13 = irdl.base "!builtin.tensor"
      %14 = irdl.base "!builtin.tensor"
      %15 = irdl.base "!builtin.tensor"
      %16 = irdl.base "!builtin.tensor"
      %17 = irdl.base "!builtin.tensor"
      irdl.results(updated_0: variadic %10, updated_1: variadic %11, updated_2: variadic %12, updated_3: variadic %13, updated_4: variadic %14, updated_5: variadic %15, updated_6: variadic %16, updated_7: variadic %17)
    }
  }
}
