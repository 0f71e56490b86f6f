// RUN: vt-opt %s --subbyte-lower | filecheck %s

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
