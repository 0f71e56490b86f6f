// Negative tests: diagnostics from the parser, the verifier and passes are matched with
// --verify-diagnostics; line numbers are those of this file across --split-input-file chunks.
// RUN: vt-opt %s --split-input-file --verify-diagnostics --vt-stats 2>/dev/null | filecheck %s

// CHECK-LABEL: func.func @fine
func.func @fine(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

func.func @wrong_result(%a: i32) -> f32 {
  // expected-error @+1 {{type of return operand 0 ('i32') doesn't match function result type ('f32')}}
  return %a : i32
}

// -----

// expected-error @below {{expected SSA operand}}
func.func @parse_error() { %x = arith.addi }

// -----

func.func @slice_too_big(%t: tensor<4xf32>) -> tensor<8xf32> {
  %s = tensor.extract_slice %t[0] [8] [1] : tensor<4xf32> to tensor<8xf32>
  // expected-error @above {{slice along dimension 0 runs out-of-bounds}}
  return %s : tensor<8xf32>
}

// -----

// CHECK: // -----
// CHECK-LABEL: func.func @also_fine
func.func @also_fine() {
  return
}
