// RUN: vt-opt %s --codegen-transpose-b-operands | filecheck %s

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#bt = affine_map<(d0, d1, d2) -> (d1, d2)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#qa = affine_map<(b, m, n, k) -> (b, m, k)>
#kt = affine_map<(b, m, n, k) -> (b, n, k)>
#qc = affine_map<(b, m, n, k) -> (b, m, n)>
#bn = affine_map<(d0, d1, d2) -> (d2, d1)>

// A Linear's constant weight W[n, k] becomes a new constant global W^T[k, n], read with the map
// (k, n); the original, read by nothing else, goes.
// CHECK-NOT:   memref.global "private" constant @w :
// CHECK:       memref.global "private" constant @w_transposed : memref<4x2xf32> = dense_resource<w_transposed> {alignment = 64 : i64}
// CHECK-NOT:   memref.global "private" constant @w :
// CHECK-LABEL: func.func @linear
// CHECK:         %[[WT:.*]] = memref.get_global @w_transposed : memref<4x2xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %[[WT]] : memref<3x4xf32>, memref<4x2xf32>)
memref.global "private" constant @w : memref<2x4xf32> = dense<[[1.0, 2.0, 0.0, 2.0], [3.0, 4.0, 0.0, 5.0]]>
func.func @linear(%x: memref<3x4xf32>, %y: memref<3x2xf32>) {
  %w = memref.get_global @w : memref<2x4xf32>
  linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<3x4xf32>, memref<2x4xf32>) outs(%y : memref<3x2xf32>) {
  ^bb0(%in: f32, %wt: f32, %out: f32):
    %m = arith.mulf %in, %wt : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  }
  return
}

// Attention's K in Q @ K^T is no constant; with 5 columns there is no panel of whole vectors (nor
// enough panels): a copy kernel writes the whole K^T before the product, which reads it as (b, k, n);
// the buffer is freed after it.
// CHECK-LABEL: func.func @q_kt
// CHECK:         %[[T:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x8x5xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}} : memref<2x5x8xf32>) outs(%[[T]] : memref<2x8x5xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[IN]] : f32
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %[[T]] : memref<2x3x8xf32>, memref<2x8x5xf32>) outs(%{{.*}} : memref<2x3x5xf32>)
// CHECK:         memref.dealloc %[[T]]
func.func @q_kt(%q: memref<2x3x8xf32>, %k: memref<2x5x8xf32>, %s: memref<2x3x5xf32>) {
  linalg.generic {indexing_maps = [#qa, #kt, #qc], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<2x3x8xf32>, memref<2x5x8xf32>) outs(%s : memref<2x3x5xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    %t = arith.addf %out, %m : f32
    linalg.yield %t : f32
  }
  return
}

// A run-time K over enough panels (4 heads x 2 tiles of 256 positions): a parallel loop whose
// iterations each transpose one panel of K into a stack buffer laid out as the schedule packs B,
// then run the product on that tile of C; no buffer holds the whole K^T.
// CHECK-LABEL: func.func @q_kt_panels
// CHECK-NOT:     memref.alloc()
// CHECK:         scf.forall (%[[H:.*]], %[[J:.*]]) in (4, 2) {
// CHECK:           %[[N0:.*]] = arith.muli %[[J]], %{{.*}} : index
// CHECK:           %[[P:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x8x256xf32>
// CHECK:           %[[KT:.*]] = memref.subview %{{.*}}[%[[H]], %[[N0]], 0] [1, 256, 8] [1, 1, 1]
// CHECK:           linalg.generic {{.*}} ins(%[[KT]] : {{.*}}) outs(%[[P]] : memref<1x8x256xf32>)
// CHECK:           %[[QT:.*]] = memref.subview %{{.*}}[%[[H]], 0, 0] [1, 3, 8] [1, 1, 1]
// CHECK:           %[[ST:.*]] = memref.subview %{{.*}}[%[[H]], 0, %[[N0]]] [1, 3, 256] [1, 1, 1]
// CHECK:           linalg.generic {{.*}} ins(%[[QT]], %[[P]] : {{.*}}, memref<1x8x256xf32>) outs(%[[ST]] :
// CHECK-NOT:     memref.dealloc
func.func @q_kt_panels(%q: memref<4x3x8xf32>, %k: memref<4x512x8xf32>, %s: memref<4x3x512xf32>) {
  linalg.generic {indexing_maps = [#qa, #kt, #qc], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<4x3x8xf32>, memref<4x512x8xf32>) outs(%s : memref<4x3x512xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    %t = arith.addf %out, %m : f32
    linalg.yield %t : f32
  }
  return
}

// A static slice of a constant weight (a fused QKV weight's rows one product reads) is a constant
// too: transposed at compile time; the global stays for its other reader.
// CHECK-LABEL: func.func @weight_rows
// CHECK:         %[[W:.*]] = memref.get_global @w3 : memref<3x4xf32>
// CHECK:         %[[WT:.*]] = memref.get_global @w3_transposed : memref<4x2xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %[[WT]] : memref<3x4xf32>, memref<4x2xf32>)
// CHECK:         memref.subview %[[W]][2, 0]
memref.global "private" constant @w3 : memref<3x4xf32> = dense<[[1.0, 2.0, 0.0, 2.0], [3.0, 4.0, 0.0, 5.0], [6.0, 7.0, 8.0, 9.0]]>
func.func @weight_rows(%x: memref<3x4xf32>, %y: memref<3x2xf32>, %z: memref<1x4xf32>) {
  %w = memref.get_global @w3 : memref<3x4xf32>
  %rows = memref.subview %w[0, 0] [2, 4] [1, 1] : memref<3x4xf32> to memref<2x4xf32, strided<[4, 1]>>
  linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %rows : memref<3x4xf32>, memref<2x4xf32, strided<[4, 1]>>) outs(%y : memref<3x2xf32>) {
  ^bb0(%in: f32, %wt: f32, %out: f32):
    %m = arith.mulf %in, %wt : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  }
  %last = memref.subview %w[2, 0] [1, 4] [1, 1] : memref<3x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 8>>
  memref.copy %last, %z : memref<1x4xf32, strided<[4, 1], offset: 8>> to memref<1x4xf32>
  return
}

// B already has n innermost: nothing to do.
// CHECK-LABEL: func.func @matmul
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic
// CHECK-NOT:     linalg.generic
func.func @matmul(%x: memref<3x4xf32>, %w: memref<4x2xf32>, %y: memref<3x2xf32>) {
  linalg.generic {indexing_maps = [#a, #bn, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<3x4xf32>, memref<4x2xf32>) outs(%y : memref<3x2xf32>) {
  ^bb0(%in: f32, %wt: f32, %out: f32):
    %m = arith.mulf %in, %wt : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  }
  return
}
