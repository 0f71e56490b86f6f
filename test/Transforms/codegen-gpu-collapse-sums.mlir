// RUN: vt-opt %s --codegen-gpu-collapse-sums | filecheck %s

// A decode step's o-projection reading the heads unflattened: out[n] += W[n, h, d] * attn[h, d],
// a sum over (h, d). Both operands read (h, d) contiguously: collapse_shape views make it one sum
// over r = h * 32 + d (the same terms in the same order), a matvec the gemv schedule takes.
// CHECK-DAG: #[[X:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[W:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[Y:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @o_projection
// CHECK:         %[[CX:.*]] = memref.collapse_shape %arg0 {{\[}}[0, 1]] : memref<8x32xf32> into memref<256xf32>
// CHECK:         %[[CW:.*]] = memref.collapse_shape %arg1 {{\[}}[0], [1, 2]] : memref<256x8x32xf32> into memref<256x256xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[X]], #[[W]], #[[Y]]], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME:      ins(%[[CX]], %[[CW]] : memref<256xf32>, memref<256x256xf32>) outs(%arg2 : memref<256xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
func.func @o_projection(%x: memref<8x32xf32>, %w: memref<256x8x32xf32>, %y: memref<256xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                                   affine_map<(d0, d1, d2) -> (d0)>],
                  iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x, %w : memref<8x32xf32>, memref<256x8x32xf32>) outs(%y : memref<256xf32>) {
  ^bb0(%in: f32, %in_w: f32, %out: f32):
    %p = arith.mulf %in, %in_w : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  }
  return
}

// The heads read with a gap between them (x's rows 64 apart, 32 long): not one contiguous
// dimension, left alone.
// CHECK-LABEL: func.func @gapped
// CHECK-NOT:     memref.collapse_shape
// CHECK:         iterator_types = ["parallel", "reduction", "reduction"]
func.func @gapped(%x: memref<8x32xf32, strided<[64, 1]>>, %w: memref<256x8x32xf32>, %y: memref<256xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
                                   affine_map<(d0, d1, d2) -> (d0)>],
                  iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x, %w : memref<8x32xf32, strided<[64, 1]>>, memref<256x8x32xf32>) outs(%y : memref<256xf32>) {
  ^bb0(%in: f32, %in_w: f32, %out: f32):
    %p = arith.mulf %in, %in_w : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  }
  return
}
