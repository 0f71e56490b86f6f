// RUN: vt-opt %s --temco-pad-in-place='where=all' | filecheck %s
// RUN: vt-opt %s --temco-pad-in-place='where=all report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: vt-opt %s --temco-pad-in-place | filecheck %s --check-prefix=PEAK
// RUN: vt-opt %s --temco-pad-in-place='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=PEAK-REPORT
// RUN: not vt-opt %s --temco-pad-in-place='where=near' -o /dev/null 2>&1 | filecheck %s --check-prefix=BAD

// where=all rewrites every eligible pad; where=peak (the default) only those whose in-place build
// lowers the function's internal peak (the backend's allocation replay).

// A conv's output padded for the next conv: the pad becomes a filled padded tensor with the source
// inserted at the low offsets (eliminate-empty-tensors then computes the conv in that interior).

// CHECK-LABEL: func.func @zero_pad
// CHECK-NOT:     tensor.pad
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<1x2x6x6xf32>
// CHECK:         %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<1x2x6x6xf32>)
// CHECK:         %[[R:.*]] = tensor.insert_slice %{{.*}} into %[[F]][0, 0, 1, 1] [1, 2, 4, 4] [1, 1, 1, 1]
// CHECK:         return %[[R]]
// REPORT: temco-pad-in-place: {{.*}}: tensor<1x2x4x4xf32> into tensor<1x2x6x6xf32>
func.func @zero_pad(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x6x6xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %cst : f32
  } : tensor<1x2x4x4xf32> to tensor<1x2x6x6xf32>
  return %p : tensor<1x2x6x6xf32>
}

// A max-pool's -inf pad with uneven amounts: the fill value is the pad value.
// CHECK-LABEL: func.func @neg_inf_pad
// CHECK:         %[[NI:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         linalg.fill ins(%[[NI]] : f32) outs(%{{.*}} : tensor<2x5x7xf32>)
// CHECK:         tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 2] [2, 4, 4] [1, 1, 1]
func.func @neg_inf_pad(%x: tensor<2x4x4xf32>) -> tensor<2x5x7xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %p = tensor.pad %x low[0, 0, 2] high[0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index):
    tensor.yield %ninf : f32
  } : tensor<2x4x4xf32> to tensor<2x5x7xf32>
  return %p : tensor<2x5x7xf32>
}

// Left alone: a value that depends on the position, and dynamic shapes.
// CHECK-LABEL: func.func @left_alone
// CHECK:         tensor.pad
// CHECK:         tensor.pad
// CHECK-NOT:     tensor.insert_slice
func.func @left_alone(%x: tensor<4xf32>, %y: tensor<?xf32>) -> (tensor<6xf32>, tensor<?xf32>) {
  %cst = arith.constant 1.000000e+00 : f32
  %p = tensor.pad %x low[1] high[1] {
  ^bb0(%i: index):
    %c = arith.index_cast %i : index to i32
    %f = arith.sitofp %c : i32 to f32
    tensor.yield %f : f32
  } : tensor<4xf32> to tensor<6xf32>
  %q = tensor.pad %y low[1] high[1] {
  ^bb0(%i: index):
    tensor.yield %cst : f32
  } : tensor<?xf32> to tensor<?xf32>
  return %p, %q : tensor<6xf32>, tensor<?xf32>
}

// where=peak: the ReLU output (2 KiB) and its padded copy (3.2 KiB) are the peak; built in place,
// the peak is the padded buffer and the 3x3 conv's output. The second pad (256 B source) is far
// below that peak: it stays a copy. The pads returned or reading an argument above gain nothing
// (the caller's arrays are not internal), so where=peak leaves them alone.
// CHECK-LABEL: func.func @peak
// CHECK-COUNT-2: tensor.insert_slice
// PEAK-LABEL: func.func @peak
// PEAK:         %[[A:.*]] = linalg.generic
// PEAK:         %[[E:.*]] = tensor.empty() : tensor<1x8x10x10xf32>
// PEAK:         %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<1x8x10x10xf32>)
// PEAK:         tensor.insert_slice %[[A]] into %[[F]][0, 0, 1, 1] [1, 8, 8, 8] [1, 1, 1, 1]
// PEAK:         linalg.conv_2d_nchw_fchw
// PEAK:         tensor.pad
// PEAK:         } : tensor<1x1x8x8xf32> to tensor<1x1x10x10xf32>
// PEAK-REPORT: temco-pad-in-place @zero_pad: peak {{[0-9]+}} B, {{[0-9]+}} B with every pad in place: no pad lowers it
// PEAK-REPORT: temco-pad-in-place @peak: peak 5376 B -> 3584 B with 1 of 2 pad(s) in place
// PEAK-REPORT-NEXT: temco-pad-in-place: {{.*}}: tensor<1x8x8x8xf32> into tensor<1x8x10x10xf32>
// PEAK-REPORT-NOT: temco-pad-in-place:
// BAD: error: temco-pad-in-place: where must be one of peak, all, got 'near'
func.func @peak(%x: tensor<1x8x8x8xf32>, %w: tensor<1x8x3x3xf32>, %v: tensor<1x1x3x3xf32>) -> tensor<1x1x8x8xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e8 = tensor.empty() : tensor<1x8x8x8xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (n, c, h, w)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x : tensor<1x8x8x8xf32>) outs(%e8 : tensor<1x8x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x8x8x8xf32>
  %pa = tensor.pad %a low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x8x8x8xf32> to tensor<1x8x10x10xf32>
  %e1 = tensor.empty() : tensor<1x1x8x8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%pa, %w : tensor<1x8x10x10xf32>, tensor<1x8x3x3xf32>) outs(%f1 : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  %e1b = tensor.empty() : tensor<1x1x8x8xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (n, c, h, w)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c : tensor<1x1x8x8xf32>) outs(%e1b : tensor<1x1x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x1x8x8xf32>
  %pb = tensor.pad %b low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x1x8x8xf32> to tensor<1x1x10x10xf32>
  %e1c = tensor.empty() : tensor<1x1x8x8xf32>
  %f1c = linalg.fill ins(%zero : f32) outs(%e1c : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  %d = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%pb, %v : tensor<1x1x10x10xf32>, tensor<1x1x3x3xf32>) outs(%f1c : tensor<1x1x8x8xf32>) -> tensor<1x1x8x8xf32>
  return %d : tensor<1x1x8x8xf32>
}
