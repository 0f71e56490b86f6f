// RUN: vt-opt %s --split-input-file --verify-diagnostics --subbyte-lower | filecheck %s
// RUN: vt-opt %s --split-input-file --verify-diagnostics --subbyte-lower='cpu-vectorize=1' | filecheck %s --check-prefix=VECTORIZE
// RUN: vt-opt %s --split-input-file --verify-diagnostics --subbyte-lower='cpu-vectorize=1 report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: vt-opt %s --split-input-file --verify-diagnostics --subbyte-lower

// The `// -----` chunks are separate modules; the `<PREFIX>-LABEL: {{^}}// -----` lines keep each
// prefix's checks of the printed IR within the chunk they are written in.

// What subbyte-pack writes for an i3 weight [K=8, N=2] with group 4: 7 bytes (one slack), a
// sub-byte tensor view, a dequantisation generic. subbyte-lower reads two bytes per code
// ((pos*3) floordiv 8 and the next), shifts by (pos*3) mod 8, masks 7, sign-extends with a shift
// pair, and fuses it all into the matmul's reduction loop: no i3, no 8x2xf32 weight remain.

// CHECK-DAG:   #[[LO:.*]] = affine_map<(d0, d1, d2) -> (((d1 * 8 + d2) * 3) floordiv 8)>
// CHECK-DAG:   #[[HI:.*]] = affine_map<(d0, d1, d2) -> (((d1 * 8 + d2) * 3) floordiv 8 + 1)>
// CHECK-DAG:   #[[SC:.*]] = affine_map<(d0, d1, d2) -> (d1, d2 floordiv 4)>
// CHECK-DAG:   #[[SHIFT:.*]] = affine_map<(d0, d1) -> (((d1 * 8 + d0) * 3) mod 8)>
// CHECK-LABEL: func.func @main
// CHECK-SAME:    %[[X:.*]]: tensor<1x8xf32>
// CHECK:         %[[P:.*]] = arith.constant dense<[80, -5, 96, 95, 93, 31, 0]> : tensor<7xi8>
// CHECK:         %[[Y:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #[[LO]], #[[HI]], #[[SC]], #{{.*}}], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[X]], %[[P]], %[[P]], %{{.*}} : tensor<1x8xf32>, tensor<7xi8>, tensor<7xi8>, tensor<2x2xf32>)
// CHECK-SAME:      lowbit.fused = "i3"
// CHECK:           ^bb0(%[[A:.*]]: f32, %[[B0:.*]]: i8, %[[B1:.*]]: i8, %[[S:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK:           %[[K:.*]] = linalg.index 2 : index
// CHECK:           %[[N:.*]] = linalg.index 1 : index
// CHECK:           affine.apply #[[SHIFT]](%[[K]], %[[N]])
// CHECK:           arith.extui %[[B0]] : i8 to i32
// CHECK:           arith.extui %[[B1]] : i8 to i32
// CHECK:           arith.shli
// CHECK:           arith.ori
// CHECK:           arith.shrui
// CHECK:           arith.andi
// CHECK:           arith.shli
// CHECK:           arith.shrsi
// CHECK:           %[[V:.*]] = arith.sitofp %{{.*}} : i32 to f32
// CHECK:           %[[WV:.*]] = arith.mulf %[[V]], %[[S]] : f32
// CHECK:           %[[PR:.*]] = arith.mulf %[[A]], %[[WV]] : f32
// CHECK:           arith.addf %[[ACC]], %[[PR]] : f32
// CHECK:         return %[[Y]]
// CHECK-NOT:     i3
// CHECK-NOT:     lowbit.unpack

#pos = affine_map<(d0, d1) -> (d1 * 8 + d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#grp = affine_map<(d0, d1) -> (d1, d0 floordiv 4)>
func.func @main(%arg0: tensor<1x8xf32>) -> tensor<1x2xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<1x2xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<1x2xf32>) -> tensor<1x2xf32>
  %packed = arith.constant dense<[80, -5, 96, 95, 93, 31, 0]> : tensor<7xi8>
  %codes = "lowbit.unpack"(%packed) {dtype = "i3", position = #pos, tile_layout = ""} : (tensor<7xi8>) -> tensor<8x2xi3>
  %scales = arith.constant dense<[[0.0969967916, 0.0934429168], [0.035616152, 0.112588905]]> : tensor<2x2xf32>
  %3 = tensor.empty() : tensor<8x2xf32>
  %4 = linalg.generic {indexing_maps = [#id, #grp, #id], iterator_types = ["parallel", "parallel"]} ins(%codes, %scales : tensor<8x2xi3>, tensor<2x2xf32>) outs(%3 : tensor<8x2xf32>) attrs = {lowbit.dequantize = "i3"} {
  ^bb0(%in: i3, %s: f32, %out: f32):
    %6 = arith.sitofp %in {lowbit.value} : i3 to f32
    %7 = arith.mulf %6, %s : f32
    linalg.yield %7 : f32
  } -> tensor<8x2xf32>
  %5 = linalg.matmul ins(%arg0, %4 : tensor<1x8xf32>, tensor<8x2xf32>) outs(%1 : tensor<1x2xf32>) -> tensor<1x2xf32>
  return %5 : tensor<1x2xf32>
}

// -----
// CHECK-LABEL: {{^}}// -----
// VECTORIZE-LABEL: {{^}}// -----

// subbyte-lower{cpu-vectorize=1}: an i3 weight [K=16, N=2] in the default stream order, group 8
// (one scale per word of 8 codes), becomes scf loops over n, row blocks and words: one 4-byte
// vector load per word (3 bytes of codes; the packed constant gains 8 bytes of slack) read as an
// i32, a shift by [0, 3, ..., 21] and mask 7 on vector<8xi32>, sign extension by a shift pair and sitofp on
// vector<8xi32>, the scale broadcast, x * w accumulated in vector<8xf32>, one horizontal add per
// output. The group-4 weight of @group4 changes scale inside a word: it keeps the portable lowering.

// REPORT: subbyte-lower: i3 matmul: CPU vector loops
// REPORT: subbyte-lower: i3 matmul: not vectorized: a scale or zero point changes inside a word of 8 codes (group size % 8 != 0)
// REPORT: subbyte-lower: i3 matmul: fused linalg.generic

// VECTORIZE-LABEL: func.func @main
// VECTORIZE-SAME:    %[[X:.*]]: tensor<3x16xf32>
// VECTORIZE:         %[[FILL:.*]] = linalg.fill
// VECTORIZE:         %[[P:.*]] = arith.constant dense<[{{.*}}, 0, 0, 0, 0, 0, 0, 0, 0]> : tensor<21xi8>
// VECTORIZE:         %[[PM:.*]] = bufferization.to_buffer %[[P]] read_only : tensor<21xi8> to memref<21xi8>
// VECTORIZE:         %[[XM:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<3x16xf32> to memref<3x16xf32>
// VECTORIZE:         %[[SM:.*]] = bufferization.to_buffer %{{.*}} read_only : tensor<2x2xf32> to memref<2x2xf32>
// VECTORIZE:         %[[Y:.*]] = scf.for %[[N:.*]] = %{{.*}} iter_args(%{{.*}} = %[[FILL]]) -> (tensor<3x2xf32>)
// VECTORIZE:           scf.for %[[M0:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// VECTORIZE:             %[[ACC:.*]]:3 = scf.for %[[KW:.*]] = %{{.*}} iter_args({{.*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>)
// VECTORIZE:               %[[BYTES:.*]] = vector.load %[[PM]][%{{.*}}] : memref<21xi8>, vector<4xi8>
// VECTORIZE:               %[[W1:.*]] = vector.bitcast %[[BYTES]] : vector<4xi8> to vector<1xi32>
// VECTORIZE:               %[[W:.*]] = vector.extract %[[W1]][0] : i32 from vector<1xi32>
// VECTORIZE:               arith.constant dense<[0, 3, 6, 9, 12, 15, 18, 21]> : vector<8xi32>
// VECTORIZE:               vector.broadcast %[[W]] : i32 to vector<8xi32>
// VECTORIZE:               arith.shrui {{.*}} : vector<8xi32>
// VECTORIZE:               arith.andi {{.*}} : vector<8xi32>
// VECTORIZE-NOT:           arith.trunci
// VECTORIZE:               arith.shli {{.*}} : vector<8xi32>
// VECTORIZE:               arith.shrsi {{.*}} : vector<8xi32>
// VECTORIZE:               %[[V:.*]] = arith.sitofp {{.*}} : vector<8xi32> to vector<8xf32>
// VECTORIZE:               %[[S:.*]] = memref.load %[[SM]]
// VECTORIZE:               %[[SV:.*]] = vector.broadcast %[[S]] : f32 to vector<8xf32>
// VECTORIZE:               %[[WV:.*]] = arith.mulf %[[V]], %[[SV]] : vector<8xf32>
// VECTORIZE:               vector.load %[[XM]][%{{.*}}, %{{.*}}] : memref<3x16xf32>, vector<8xf32>
// VECTORIZE:               arith.mulf %{{.*}}, %[[WV]] : vector<8xf32>
// VECTORIZE:               arith.addf {{.*}} : vector<8xf32>
// VECTORIZE:               scf.yield {{.*}} : vector<8xf32>, vector<8xf32>, vector<8xf32>
// VECTORIZE:             vector.reduction <add>, %[[ACC]]#0 : vector<8xf32> into f32
// VECTORIZE:             tensor.insert
// VECTORIZE:         return %[[Y]]
// VECTORIZE-NOT:     linalg.matmul
// VECTORIZE-NOT:     lowbit.unpack

// VECTORIZE-LABEL: func.func @group4
// VECTORIZE:         linalg.generic
// VECTORIZE-SAME:      lowbit.fused = "i3"

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

// -----


// A sub-byte tensor read by anything but a linalg.generic cannot be lowered.
func.func @bad_user() -> tensor<4xi4> {
  %packed = arith.constant dense<0> : tensor<4xi8>
  %codes = "lowbit.unpack"(%packed) {dtype = "u4", position = affine_map<(d0) -> (d0)>, tile_layout = ""} : (tensor<4xi8>) -> tensor<8xi4>
  // expected-error @+1 {{subbyte-lower: the sub-byte tensor is used by 'tensor.extract_slice'}}
  %s = tensor.extract_slice %codes[0] [4] [1] : tensor<8xi4> to tensor<4xi4>
  return %s : tensor<4xi4>
}
