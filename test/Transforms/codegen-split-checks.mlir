// RUN: vt-opt %s --codegen-split-checks | filecheck %s

#nchw = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#chan = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>

// BatchNorm as the importer leaves it: the divisor check of a per-channel value inside the
// normalisation. The check moves into a kernel over the channels only; the normalisation keeps its
// computation without the assert.
// CHECK-LABEL: func.func @batchnorm
// CHECK:         linalg.generic {indexing_maps = [#[[CH:.*]]], iterator_types = ["parallel"]} ins(%{{.*}} : memref<16x1x1xf32>) {
// CHECK:           math.sqrt
// CHECK:           cf.assert %{{.*}}, "unimplemented: tensor with zero element"
// CHECK-NEXT:      linalg.yield
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
// CHECK-NOT:       cf.assert
// CHECK:           arith.divf
// CHECK:           linalg.yield
func.func @batchnorm(%x: memref<1x16x8x8xf32>, %var: memref<16x1x1xf32>, %y: memref<1x16x8x8xf32>) {
  %eps = arith.constant 1.0e-05 : f32
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#nchw, #chan, #nchw], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %var : memref<1x16x8x8xf32>, memref<16x1x1xf32>) outs(%y : memref<1x16x8x8xf32>) {
  ^bb0(%in: f32, %v: f32, %out: f32):
    %s = arith.addf %v, %eps : f32
    %r = math.sqrt %s : f32
    %ok = arith.cmpf one, %r, %zero : f32
    cf.assert %ok, "unimplemented: tensor with zero element"
    %d = arith.divf %one, %r : f32
    %n = arith.mulf %in, %d : f32
    linalg.yield %n : f32
  }
  return
}

// A check-only kernel over the whole activation that reads one value per channel shrinks to the channels.
// CHECK-LABEL: func.func @check_only
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}], iterator_types = ["parallel"]} ins(%{{.*}} : memref<16x1x1xf32>)
// CHECK-NOT:     linalg.generic
// CHECK:         return
func.func @check_only(%x: memref<1x16x8x8xf32>, %var: memref<16x1x1xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#nchw, #chan], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %var : memref<1x16x8x8xf32>, memref<16x1x1xf32>) {
  ^bb0(%in: f32, %v: f32):
    %ok = arith.cmpf one, %v, %zero : f32
    cf.assert %ok, "unimplemented: tensor with zero element"
    linalg.yield
  }
  return
}

// A BatchNorm over a 1x1 image fused into the 1x1 convolution after it: its [C, 1, 1] variance needs no
// broadcast and is read through the convolution's window, (c, h + kh, w + kw); a dimension of extent 1
// is read at index 0 whatever its expression, so the check is over the channels only.
// CHECK-LABEL: func.func @unit_image_window
// CHECK:         linalg.generic {indexing_maps = [#[[UNIT:.*]]], iterator_types = ["parallel"]} ins(%arg1 : memref<16x1x1xf32>) {
// CHECK:           cf.assert
// CHECK:         linalg.generic
// CHECK-NOT:       cf.assert
// CHECK:           linalg.yield
func.func @unit_image_window(%x: memref<2x16x1x1xf32>, %var: memref<16x1x1xf32>, %w: memref<8x16x1x1xf32>, %y: memref<2x8x1x1xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [affine_map<(n, f, h, w, kh, kw, c) -> (n, c, h + kh, w + kw)>,
                                   affine_map<(n, f, h, w, kh, kw, c) -> (c, h + kh, w + kw)>,
                                   affine_map<(n, f, h, w, kh, kw, c) -> (f, c, kh, kw)>,
                                   affine_map<(n, f, h, w, kh, kw, c) -> (n, f, h, w)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %var, %w : memref<2x16x1x1xf32>, memref<16x1x1xf32>, memref<8x16x1x1xf32>) outs(%y : memref<2x8x1x1xf32>) {
  ^bb0(%in: f32, %v: f32, %k: f32, %out: f32):
    %r = math.sqrt %v : f32
    %ok = arith.cmpf one, %r, %zero : f32
    cf.assert %ok, "unimplemented: tensor with zero element"
    %n = arith.divf %in, %r : f32
    %m = arith.mulf %n, %k : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  }
  return
}

// A window over a dimension of more than one element is no per-channel value: the check stays.
// CHECK-LABEL: func.func @window_check
// CHECK:         linalg.generic
// CHECK:           cf.assert
// CHECK-NOT:     linalg.generic
func.func @window_check(%x: memref<1x4x3x3xf32>, %win: memref<2x2xf32>, %y: memref<1x4x2x2xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [affine_map<(n, c, h, w, kh, kw) -> (n, c, h + kh, w + kw)>,
                                   affine_map<(n, c, h, w, kh, kw) -> (kh, kw)>,
                                   affine_map<(n, c, h, w, kh, kw) -> (n, c, h, w)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %win : memref<1x4x3x3xf32>, memref<2x2xf32>) outs(%y : memref<1x4x2x2xf32>) {
  ^bb0(%in: f32, %k: f32, %out: f32):
    %ok = arith.cmpf one, %in, %zero : f32
    cf.assert %ok, "unimplemented: tensor with zero element"
    %s = arith.maximumf %out, %in : f32
    linalg.yield %s : f32
  }
  return
}
