// RUN: vt-opt %s --split-input-file --verify-diagnostics

// Every verifier error of layout.convert, one per split.

func.func @f(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{invalid dst_layout: perm [1, 1] is not a permutation of 0..1}}
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1>}, dst_layout = {perm = array<i64: 1, 1>}}
      : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @f(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{src_layout has logical rank 2 but dst_layout has 3}}
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1>}, dst_layout = {perm = array<i64: 0, 2, 1>}}
      : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @f(%x: tensor<2x3x4xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{source has rank 3 but src_layout has physical rank 2}}
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1>}, dst_layout = {perm = array<i64: 1, 0>}}
      : (tensor<2x3x4xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @f(%x: tensor<1x30x7x7xf32>) -> tensor<1x2x7x7x16xf32> {
  // expected-error @+1 {{dst_layout cannot hold the logical shape [1, 30, 7, 7]: logical dim 1 of size 30 is not divisible by its block 16}}
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1, 2, 3>},
                             dst_layout = {perm = array<i64: 0, 1, 2, 3>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>}}
      : (tensor<1x30x7x7xf32>) -> tensor<1x2x7x7x16xf32>
  return %0 : tensor<1x2x7x7x16xf32>
}

// -----

func.func @f(%x: tensor<1x32x7x7xf32>) -> tensor<1x32x7x7xf32> {
  // expected-error @+1 {{result shape [1, 32, 7, 7] does not match [1, 7, 7, 32] (logical shape [1, 32, 7, 7] in dst_layout)}}
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1, 2, 3>}, dst_layout = {perm = array<i64: 0, 2, 3, 1>}}
      : (tensor<1x32x7x7xf32>) -> tensor<1x32x7x7xf32>
  return %0 : tensor<1x32x7x7xf32>
}

// -----

func.func @f(%x: tensor<1x2x7x7x8xf32>) -> tensor<1x16x7x7xf32> {
  // expected-error @+1 {{source does not fit src_layout: inner block of dim 1 has size 8, the layout says 16}}
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1, 2, 3>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>},
                             dst_layout = {perm = array<i64: 0, 1, 2, 3>}}
      : (tensor<1x2x7x7x8xf32>) -> tensor<1x16x7x7xf32>
  return %0 : tensor<1x16x7x7xf32>
}

// -----

func.func @f(%x: tensor<2x3xf32>) -> tensor<3x2xf16> {
  // expected-error @+1 {{result element type f16 differs from source element type f32}}
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1>}, dst_layout = {perm = array<i64: 1, 0>}}
      : (tensor<2x3xf32>) -> tensor<3x2xf16>
  return %0 : tensor<3x2xf16>
}

// -----

func.func @f(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{invalid src_layout: unknown layout key(s) ['order']}}
  %0 = "layout.convert"(%x) {src_layout = {order = array<i64: 0, 1>}, dst_layout = {perm = array<i64: 1, 0>}}
      : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @f(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{invalid dst_layout: block size 0 of dim 1 must be positive}}
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1>},
                             dst_layout = {perm = array<i64: 1, 0>, block_dims = array<i64: 1>, block_sizes = array<i64: 0>}}
      : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @f(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{attribute dst_layout is expected but not provided}}
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1>}} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
