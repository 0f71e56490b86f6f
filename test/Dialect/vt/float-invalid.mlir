// RUN: vt-opt %s --split-input-file --verify-diagnostics

// IRDL checks the parameter kinds of !vt.float (the value ranges are checked where the type is
// used, e.g. by layout.reinterpret and vtmlir.lowbit.LowBitType.from_mlir_type).

// expected-error @+1 {{expected base attribute 'builtin.string' but got 'builtin.integer'}}
func.func private @f(tensor<4x!vt.float<3, 3, 1>>)

// -----

// expected-error @+1 {{expected base attribute 'builtin.integer' but got 'builtin.string'}}
func.func private @f(tensor<4x!vt.float<"3", 3, "finite">>)
