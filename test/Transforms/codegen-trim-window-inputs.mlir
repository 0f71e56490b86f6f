// RUN: vt-opt %s --codegen-trim-window-inputs | filecheck %s

// A 3x3 stride-2 window with one output row and column over a 4x4 (padded) input reads rows and
// columns 0..2: the input becomes a view of those, so folding the unit output loops later leaves
// `kh` over an extent of 3, the filter's. The filter, read by plain dimensions, stays as it is.
// CHECK-LABEL: func.func @strided_window
// CHECK:         %[[V:.*]] = memref.subview %arg0[0, 0, 0] [8, 3, 3] [1, 1, 1] : memref<8x4x4xf32> to memref<8x3x3xf32, strided<[16, 4, 1]>>
// CHECK:         linalg.generic
// CHECK-SAME:        ins(%[[V]], %arg1 : memref<8x3x3xf32, strided<[16, 4, 1]>>, memref<8x3x3xf32>)
func.func @strided_window(%x: memref<8x4x4xf32>, %w: memref<8x3x3xf32>, %y: memref<8x1x1xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, oh, ow, kh, kw) -> (c, oh * 2 + kh, ow * 2 + kw)>,
                                   affine_map<(c, oh, ow, kh, kw) -> (c, kh, kw)>,
                                   affine_map<(c, oh, ow, kh, kw) -> (c, oh, ow)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %w : memref<8x4x4xf32>, memref<8x3x3xf32>) outs(%y : memref<8x1x1xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// A window that reaches its input's last row (stride 1, 'same' padding): unchanged.
// CHECK-LABEL: func.func @full_window
// CHECK-NOT:     memref.subview
func.func @full_window(%x: memref<8x6x6xf32>, %w: memref<8x3x3xf32>, %y: memref<8x4x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, oh, ow, kh, kw) -> (c, oh + kh, ow + kw)>,
                                   affine_map<(c, oh, ow, kh, kw) -> (c, kh, kw)>,
                                   affine_map<(c, oh, ow, kh, kw) -> (c, oh, ow)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %w : memref<8x6x6xf32>, memref<8x3x3xf32>) outs(%y : memref<8x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}
