// RUN: vt-opt %s --split-input-file --verify-diagnostics --layout-materialize

// A pad of a blocked dim would not be a whole number of blocks: refused, naming the op.
func.func @pad_blocked_channels(%x: tensor<1x16x4x4xf32>) -> tensor<1x32x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{layout-materialize: cannot materialise a tensor.pad of a blocked dim in NCHW16c}}
  %p = tensor.pad %x low[0, 0, 0, 0] high[0, 16, 0, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } {layout.required = [{perm = array<i64: 0, 1, 2, 3>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>}],
     layout.produced = [{perm = array<i64: 0, 1, 2, 3>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>}]}
     : tensor<1x16x4x4xf32> to tensor<1x32x4x4xf32>
  return %p : tensor<1x32x4x4xf32>
}

// -----

// A blocked dim indexed by a sum of loops cannot be split: refused, naming the op and why.
#in = affine_map<(d0, d1, d2) -> (d0, d1 + d2)>
#k = affine_map<(d0, d1, d2) -> (d2)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @blocked_sum(%x: tensor<1x32xf32>, %k: tensor<16xf32>, %y: tensor<1x16xf32>) -> tensor<1x16xf32> {
  // expected-error @+1 {{layout-materialize: cannot materialise the blocked layout MN16n of 'linalg.generic': operand 0's blocked dim 1 is indexed by 'd1 + d2', not by a single loop}}
  %r = linalg.generic {indexing_maps = [#in, #k, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %k : tensor<1x32xf32>, tensor<16xf32>) outs(%y : tensor<1x16xf32>)
      attrs = {layout.required = [{perm = array<i64: 0, 1>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>}, {perm = array<i64: 0>}, {perm = array<i64: 0, 1>}],
               layout.produced = [{perm = array<i64: 0, 1>}]} {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<1x16xf32>
  return %r : tensor<1x16xf32>
}
