// RUN: vt-opt %s --split-input-file --verify-diagnostics

// Every verifier error of the vt ops, one per split.

func.func @f(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{invalid mapping: piece #0: source index 1 out of range (the op has 1 source(s))}}
  %0 = "vt.view"(%a) {mapping = [{source = 1 : i64, map = affine_map<(d0, d1) -> (d0, d1)>}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @f(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{map (d0) -> (d0, d0) has 1 dims but the virtual tensor has rank 2}}
  %0 = "vt.view"(%a) {mapping = [{source = 0 : i64, map = affine_map<(d0) -> (d0, d0)>}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @f(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{has 1 results but source #0 has rank 2}}
  %0 = "vt.view"(%a) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1) -> (d0)>}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @f(%a: tensor<2x4xf16>) -> tensor<2x4xf32> {
  // expected-error @+1 {{source #0 has element type f16 but the result has f32}}
  %0 = "vt.view"(%a) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf16>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @f(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{invalid mapping: pieces #0 and #1 overlap}}
  %0 = "vt.view"(%a, %b) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, dims = array<i64: 0>, lo = array<i64: 0>, hi = array<i64: 2>}, {source = 1 : i64, map = affine_map<(d0, d1) -> (d0 - 1, d1)>, dims = array<i64: 0>, lo = array<i64: 1>, hi = array<i64: 3>}], operandSegmentSizes = array<i32: 2, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @f(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>) -> tensor<6x4xf32> {
  // expected-error @+1 {{invalid mapping: pieces leave a gap: they cover 5 of 6 positions along dim 0}}
  %0 = "vt.view"(%a, %b) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, dims = array<i64: 0>, lo = array<i64: 0>, hi = array<i64: 2>}, {source = 1 : i64, map = affine_map<(d0, d1) -> (d0 - 3, d1)>, dims = array<i64: 0>, lo = array<i64: 3>, hi = array<i64: 6>}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

func.func @f(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{piece #0: split dimension 2 out of range for rank 2}}
  %0 = "vt.view"(%a) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, dims = array<i64: 2>, lo = array<i64: 0>, hi = array<i64: 1>}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @f(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{piece #0 maps virtual index (0, 3) to (0, 5), outside source #0 (dim 1 has size 4)}}
  %0 = "vt.view"(%a) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1 + 2)>}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @f(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{invalid mapping: source #1 is used by no piece}}
  %0 = "vt.view"(%a, %b) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @f(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{invalid mapping: piece #0 lacks 'map'}}
  %0 = "vt.view"(%a) {mapping = [{source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @f(%a: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{invalid mapping: mapping has no pieces}}
  %0 = "vt.view"(%a) {mapping = [], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @f(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{piece #0: split dimension 0 is dynamic in the virtual tensor}}
  %0 = "vt.view"(%a) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, dims = array<i64: 0>, lo = array<i64: 0>, hi = array<i64: 2>}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @f(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{divides by something other than a positive constant}}
  %0 = "vt.view"(%a) {mapping = [{source = 0 : i64, map = affine_map<(d0) -> (d0 floordiv 0)>}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f(%v: tensor<4xf32>, %d: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{result #0 has type tensor<4xf32> but destination #0 has tensor<8xf32>}}
  %0 = "vt.store_into"(%v, %d) {mapping = [{source = 0 : i64, map = affine_map<(d0) -> (d0)>}],
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xf32>, tensor<8xf32>) -> tensor<4xf32>
  return %d : tensor<8xf32>
}

// -----

func.func @f(%v: tensor<4xf32>, %d: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{invalid mapping: piece #0 maps virtual index (3,) to (9,), outside destination #0 (dim 0 has size 8)}}
  %0 = "vt.store_into"(%v, %d) {mapping = [{source = 0 : i64, map = affine_map<(d0) -> (d0 + 6)>}],
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f(%v: tensor<4xi32>, %d: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{destination #0 has element type f32 but the value has i32}}
  %0 = "vt.store_into"(%v, %d) {mapping = [{source = 0 : i64, map = affine_map<(d0) -> (d0)>}],
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xi32>, tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @f(%v: tensor<4xf32>, %d: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{expects at least one destination}}
  "vt.store_into"(%v) {mapping = [{source = 0 : i64, map = affine_map<(d0) -> (d0)>}],
      operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 0, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xf32>) -> ()
  return %d : tensor<8xf32>
}

// -----

func.func @f(%v: tensor<4xf32>, %d: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{vt.store_into' op attribute mapping is expected but not provided}}
  %0 = "vt.store_into"(%v, %d) {operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
