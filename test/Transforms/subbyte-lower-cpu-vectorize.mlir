// RUN: vt-opt %s --subbyte-lower='cpu-vectorize=1' | filecheck %s
// RUN: vt-opt %s --subbyte-lower='cpu-vectorize=1 report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT

// subbyte-lower{cpu-vectorize=1}: an i3 weight [K=16, N=2] in the default stream order, group 8
// (one scale per word of 8 codes), becomes scf loops over n, row blocks and words: one 4-byte
// vector load per word (3 bytes of codes; the packed constant gains 8 bytes of slack) read as an
// i32, a shift by [0, 3, ..., 21] and mask 7 on vector<8xi32>, sign extension by a shift pair and sitofp on
// vector<8xi32>, the scale broadcast, x * w accumulated in vector<8xf32>, one horizontal add per
// output. The group-4 weight of @group4 changes scale inside a word: it keeps the portable lowering.

// REPORT: subbyte-lower: i3 matmul: CPU vector loops
// REPORT: subbyte-lower: i3 matmul: not vectorized: a scale or zero point changes inside a word of 8 codes (group size % 8 != 0)
// REPORT: subbyte-lower: i3 matmul: fused linalg.generic

// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[X:.*]]: tensor<3x16xf32>
// CHECK:         %[[FILL:.*]] = linalg.fill
// CHECK:         %[[P:.*]] = arith.constant dense<[{{.*}}, 0, 0, 0, 0, 0, 0, 0, 0]> : tensor<21xi8>
// CHECK:         %[[PM:.*]] = bufferization.to_buffer %[[P]] read_only : tensor<21xi8> to memref<21xi8>
// CHECK:         %[[XM:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<3x16xf32> to memref<3x16xf32>
// CHECK:         %[[SM:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<2x2xf32> to memref<2x2xf32>
// CHECK:         %[[Y:.*]] = scf.for %[[N:.*]] = %{{.*}} iter_args(%{{.*}} = %[[FILL]]) -> (tensor<3x2xf32>)
// CHECK:           scf.for %[[M0:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK:             %[[ACC:.*]]:3 = scf.for %[[KW:.*]] = %{{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK:               %[[BYTES:.*]] = vector.load %[[PM]][%{{.*}}] : memref<21xi8>, vector<4xi8>
// CHECK:               %[[W1:.*]] = vector.bitcast %[[BYTES]] : vector<4xi8> to vector<1xi32>
// CHECK:               %[[W:.*]] = vector.extract %[[W1]][0] : i32 from vector<1xi32>
// CHECK:               arith.constant dense<[0, 3, 6, 9, 12, 15, 18, 21]> : vector<8xi32>
// CHECK:               vector.broadcast %[[W]] : i32 to vector<8xi32>
// CHECK:               arith.shrui {{.*}} : vector<8xi32>
// CHECK:               arith.andi {{.*}} : vector<8xi32>
// CHECK-NOT:           arith.trunci
// CHECK:               arith.shli {{.*}} : vector<8xi32>
// CHECK:               arith.shrsi {{.*}} : vector<8xi32>
// CHECK:               %[[V:.*]] = arith.sitofp {{.*}} : vector<8xi32> to vector<8xf32>
// CHECK:               %[[S:.*]] = memref.load %[[SM]]
// CHECK:               %[[SV:.*]] = vector.broadcast %[[S]] : f32 to vector<8xf32>
// CHECK:               %[[WV:.*]] = arith.mulf %[[V]], %[[SV]] : vector<8xf32>
// CHECK:               vector.load %[[XM]][%{{.*}}, %{{.*}}] : memref<3x16xf32>, vector<8xf32>
// CHECK:               arith.mulf %{{.*}}, %[[WV]] : vector<8xf32>
// CHECK:               arith.addf {{.*}} : vector<8xf32>
// CHECK:               scf.yield {{.*}} : vector<8xf32>, vector<8xf32>, vector<8xf32>
// CHECK:             vector.reduction <add>, %[[ACC]]#0 : vector<8xf32> into f32
// CHECK:             tensor.insert
// CHECK:         return %[[Y]]
// CHECK-NOT:     linalg.matmul
// CHECK-NOT:     lowbit.unpack

// CHECK-LABEL: func.func @group4
// CHECK:         linalg.generic
// CHECK-SAME:      lowbit.fused = "i3"

#pos = affine_map<(d0, d1) -> (d1 * 16 + d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#grp = affine_map<(d0, d1) -> (d1, d0 floordiv 8)>
#grp4 = affine_map<(d0, d1) -> (d1, d0 floordiv 4)>
func.func @main(%arg0: tensor<3x16xf32>) -> tensor<3x2xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<3x2xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<3x2xf32>) -> tensor<3x2xf32>
  %packed = arith.constant dense<[80, -5, 96, 95, 93, 31, 17, -128, 3, 64, 9, 33, 0]> : tensor<13xi8>
  %codes = "lowbit.unpack"(%packed) {dtype = "i3", position = #pos, tile_layout = ""} : (tensor<13xi8>) -> tensor<16x2xi3>
  %scales = arith.constant dense<[[0.5, 0.25], [2.0, 4.0]]> : tensor<2x2xf32>
  %3 = tensor.empty() : tensor<16x2xf32>
  %4 = linalg.generic {indexing_maps = [#id, #grp, #id], iterator_types = ["parallel", "parallel"]} ins(%codes, %scales : tensor<16x2xi3>, tensor<2x2xf32>) outs(%3 : tensor<16x2xf32>) attrs = {lowbit.dequantize = "i3"} {
  ^bb0(%in: i3, %s: f32, %out: f32):
    %6 = arith.sitofp %in {lowbit.value} : i3 to f32
    %7 = arith.mulf %6, %s : f32
    linalg.yield %7 : f32
  } -> tensor<16x2xf32>
  %5 = linalg.matmul ins(%arg0, %4 : tensor<3x16xf32>, tensor<16x2xf32>) outs(%1 : tensor<3x2xf32>) -> tensor<3x2xf32>
  return %5 : tensor<3x2xf32>
}

func.func @group4(%arg0: tensor<3x16xf32>) -> tensor<3x2xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<3x2xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<3x2xf32>) -> tensor<3x2xf32>
  %packed = arith.constant dense<[80, -5, 96, 95, 93, 31, 17, -128, 3, 64, 9, 33, 0]> : tensor<13xi8>
  %codes = "lowbit.unpack"(%packed) {dtype = "i3", position = #pos, tile_layout = ""} : (tensor<13xi8>) -> tensor<16x2xi3>
  %scales = arith.constant dense<[[0.5, 0.25, 1.0, 2.0], [2.0, 4.0, 8.0, 0.5]]> : tensor<2x4xf32>
  %3 = tensor.empty() : tensor<16x2xf32>
  %4 = linalg.generic {indexing_maps = [#id, #grp4, #id], iterator_types = ["parallel", "parallel"]} ins(%codes, %scales : tensor<16x2xi3>, tensor<2x4xf32>) outs(%3 : tensor<16x2xf32>) attrs = {lowbit.dequantize = "i3"} {
  ^bb0(%in: i3, %s: f32, %out: f32):
    %6 = arith.sitofp %in {lowbit.value} : i3 to f32
    %7 = arith.mulf %6, %s : f32
    linalg.yield %7 : f32
  } -> tensor<16x2xf32>
  %5 = linalg.matmul ins(%arg0, %4 : tensor<3x16xf32>, tensor<16x2xf32>) outs(%1 : tensor<3x2xf32>) -> tensor<3x2xf32>
  return %5 : tensor<3x2xf32>
}
