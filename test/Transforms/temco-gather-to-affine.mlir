// RUN: vt-opt %s --temco-gather-to-affine | filecheck %s
// RUN: vt-opt %s --temco-gather-to-affine='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT

// torch-mlir's upsample_nearest2d (scale 2): a generic without inputs that computes the source row
// and column as clamp(floor(float(i) / 2.0)) and reads the captured tensor with tensor.extract.
// The index tables equal i floordiv 2, so the generic reads %x through that map instead (and can
// be tiled and fused like any elementwise op, TeMCO §3.2).

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// CHECK: #[[UP:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 floordiv 2, d3 floordiv 2)>
// CHECK-LABEL: func.func @upsample_nearest
// CHECK-SAME:    %[[X:.*]]: tensor<1x2x3x3xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[UP]], #{{.*}}], {{.*}} ins(%[[X]] : tensor<1x2x3x3xf32>) outs(%{{.*}} : tensor<1x2x6x6xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[IN]] : f32
// CHECK-NOT:     tensor.extract
// REPORT: temco-gather-to-affine: {{.*}}: reads tensor<1x2x3x3xf32> through (d0, d1, d2, d3) -> (d0, d1, d2 floordiv 2, d3 floordiv 2)
// REPORT-NOT: temco-gather-to-affine
func.func @upsample_nearest(%x: tensor<1x2x3x3xf32>) -> tensor<1x2x6x6xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %two = arith.constant 2.000000e+00 : f32
  %hi = arith.constant 2.000000e+00 : f32
  %e = tensor.empty() : tensor<1x2x6x6xf32>
  %y = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%e : tensor<1x2x6x6xf32>) {
  ^bb0(%out: f32):
    %n = linalg.index 0 : index
    %c = linalg.index 1 : index
    %h = linalg.index 2 : index
    %w = linalg.index 3 : index
    %h64 = arith.index_cast %h : index to i64
    %hf = arith.sitofp %h64 : i64 to f32
    %hd = arith.divf %hf, %two : f32
    %hfl = math.floor %hd : f32
    %hmax = arith.maximumf %hfl, %zero : f32
    %hmin = arith.minimumf %hmax, %hi : f32
    %hi64 = arith.fptosi %hmin : f32 to i64
    %hs = arith.index_cast %hi64 : i64 to index
    %w64 = arith.index_cast %w : index to i64
    %wf = arith.sitofp %w64 : i64 to f32
    %wd = arith.divf %wf, %two : f32
    %wfl = math.floor %wd : f32
    %wmax = arith.maximumf %wfl, %zero : f32
    %wmin = arith.minimumf %wmax, %hi : f32
    %wi64 = arith.fptosi %wmin : f32 to i64
    %ws = arith.index_cast %wi64 : i64 to index
    %v = tensor.extract %x[%n, %c, %hs, %ws] : tensor<1x2x3x3xf32>
    linalg.yield %v : f32
  } -> tensor<1x2x6x6xf32>
  return %y : tensor<1x2x6x6xf32>
}

// Left alone: a reversed row (index 5 - i is not i or i floordiv q), and a clamp that changes the
// table (the last row would read row 1: not i floordiv 2 for every i).
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-2: tensor.extract %
func.func @left_alone(%x: tensor<1x1x6x6xf32>, %z: tensor<1x1x3x6xf32>) -> (tensor<1x1x6x6xf32>, tensor<1x1x6x6xf32>) {
  %c5 = arith.constant 5 : index
  %zero = arith.constant 0.000000e+00 : f32
  %two = arith.constant 2.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %e = tensor.empty() : tensor<1x1x6x6xf32>
  %r = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%e : tensor<1x1x6x6xf32>) {
  ^bb0(%out: f32):
    %n = linalg.index 0 : index
    %c = linalg.index 1 : index
    %h = linalg.index 2 : index
    %w = linalg.index 3 : index
    %rh = arith.subi %c5, %h : index
    %v = tensor.extract %x[%n, %c, %rh, %w] : tensor<1x1x6x6xf32>
    linalg.yield %v : f32
  } -> tensor<1x1x6x6xf32>
  %u = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%e : tensor<1x1x6x6xf32>) {
  ^bb0(%out: f32):
    %n = linalg.index 0 : index
    %c = linalg.index 1 : index
    %h = linalg.index 2 : index
    %w = linalg.index 3 : index
    %h64 = arith.index_cast %h : index to i64
    %hf = arith.sitofp %h64 : i64 to f32
    %hd = arith.divf %hf, %two : f32
    %hfl = math.floor %hd : f32
    %hmin = arith.minimumf %hfl, %one : f32
    %hi64 = arith.fptosi %hmin : f32 to i64
    %hs = arith.index_cast %hi64 : i64 to index
    %v = tensor.extract %z[%n, %c, %hs, %w] : tensor<1x1x3x6xf32>
    linalg.yield %v : f32
  } -> tensor<1x1x6x6xf32>
  return %r, %u : tensor<1x1x6x6xf32>, tensor<1x1x6x6xf32>
}
