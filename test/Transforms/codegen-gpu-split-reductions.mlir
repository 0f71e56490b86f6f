// RUN: vt-opt %s --codegen-gpu-split-reductions="chip=sm_90" | filecheck %s
// RUN: vt-opt %s --codegen-gpu-split-reductions="chip=sm_90 schedules=unknown.split_reductions:false" | filecheck %s --check-prefix=OFF

// Attention's product in a decode step: 2 x 32 outputs, each a 4096-long sum. It becomes 64 chunk
// sums of 64 (J outermost, the inputs viewed through expand_shape, strides kept, the partial buffer
// filled with -0.0, addf's exact identity) and their combine into the output.
// CHECK-DAG: #[[P:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3)>
// CHECK-DAG: #[[V:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d3, d2)>
// CHECK-DAG: #[[PART:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG: #[[PARTIN:.*]] = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @pv
// CHECK:         %[[EP:.*]] = memref.expand_shape %arg0 {{\[}}[0], [1, 2]] output_shape [2, 64, 64] : memref<2x4096xf32> into memref<2x64x64xf32>
// CHECK:         %[[EV:.*]] = memref.expand_shape %arg1 {{\[}}[0], [1, 2], [3]] output_shape [2, 64, 64, 32] : {{.*}} into memref<2x64x64x32xf32, strided<[262144, 2048, 32, 1], offset: 64>>
// CHECK:         %[[BUF:.*]] = memref.alloc() {alignment = 64 : i64} : memref<64x2x32xf32>
// CHECK:         %[[ID:.*]] = arith.constant -0.000000e+00 : f32
// CHECK:         linalg.fill ins(%[[ID]] : f32) outs(%[[BUF]] : memref<64x2x32xf32>)
// CHECK:         linalg.generic {indexing_maps = [#[[P]], #[[V]], #[[PART]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[EP]], %[[EV]] : {{.*}}) outs(%[[BUF]] : memref<64x2x32xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         linalg.generic {indexing_maps = [#[[PARTIN]], #[[OUT]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[BUF]] : memref<64x2x32xf32>) outs(%arg2 : memref<2x32xf32>)
// CHECK:         ^bb0(%[[IN:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK:           %[[SUM:.*]] = arith.addf %[[ACC]], %[[IN]] : f32
// CHECK:           linalg.yield %[[SUM]] : f32
// CHECK:         memref.dealloc %[[BUF]] : memref<64x2x32xf32>
// OFF-LABEL: func.func @pv
// OFF-NOT:     memref.expand_shape
// OFF:         linalg.generic
// OFF-SAME:      ins(%arg0, %arg1
func.func @pv(%p: memref<2x4096xf32>, %v: memref<2x4096x32xf32, strided<[262144, 32, 1], offset: 64>>, %o: memref<2x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d2, d1)>,
                                   affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%p, %v : memref<2x4096xf32>, memref<2x4096x32xf32, strided<[262144, 32, 1], offset: 64>>) outs(%o : memref<2x32xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %0 = arith.mulf %a, %b : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// A sum over a middle dimension with 131072 outputs fills the GPU as it is: not split.
// CHECK-LABEL: func.func @many_outputs
// CHECK-NOT:     memref.expand_shape
// CHECK:         linalg.generic {{.*}} ins(%arg0 : memref<32x4096x4096xf32>) outs(%arg1 : memref<32x4096xf32>)
func.func @many_outputs(%x: memref<32x4096x4096xf32>, %o: memref<32x4096xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<32x4096x4096xf32>) outs(%o : memref<32x4096xf32>) {
  ^bb0(%a: f32, %out: f32):
    %0 = arith.addf %a, %out : f32
    linalg.yield %0 : f32
  }
  return
}

// A row reduction (softmax's max) is the row schedules' (a warp or block per row): not split.
// CHECK-LABEL: func.func @row
// CHECK-NOT:     memref.expand_shape
// CHECK:         linalg.generic {{.*}} ins(%arg0 : memref<4x8192xf32>) outs(%arg1 : memref<4xf32>)
func.func @row(%x: memref<4x8192xf32>, %o: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8192xf32>) outs(%o : memref<4xf32>) {
  ^bb0(%a: f32, %out: f32):
    %0 = arith.maximumf %a, %out : f32
    linalg.yield %0 : f32
  }
  return
}

// A window sum (a pooling kernel: oh + kh) does not split.
// CHECK-LABEL: func.func @window
// CHECK-NOT:     memref.expand_shape
func.func @window(%x: memref<4x4159xf32>, %w: memref<4096xf32>, %o: memref<4x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1 + d2)>, affine_map<(d0, d1, d2) -> (d2)>,
                                   affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<4x4159xf32>, memref<4096xf32>) outs(%o : memref<4x64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %0 = arith.addf %a, %out : f32
    linalg.yield %0 : f32
  }
  return
}

// A sum of 1024 over few outputs: shorter than two more launches are worth (MIN_EXTENT): not split.
// CHECK-LABEL: func.func @short
// CHECK-NOT:     memref.expand_shape
func.func @short(%p: memref<2x1024xf32>, %v: memref<2x1024x32xf32>, %o: memref<2x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d2, d1)>,
                                   affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%p, %v : memref<2x1024xf32>, memref<2x1024x32xf32>) outs(%o : memref<2x32xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %0 = arith.mulf %a, %b : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  return
}
