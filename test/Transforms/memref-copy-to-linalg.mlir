// RUN: vt-opt %s --memref-copy-to-linalg | filecheck %s

// CHECK-LABEL: func.func @copy_to_out_param
// CHECK-SAME:    %[[SRC:[^:]*]]: memref<4x8xf32>, %[[DST:[^:]*]]: memref<4x8xf32>
// CHECK-NOT:     memref.copy
// CHECK:         linalg.copy {{.*}}ins(%[[SRC]] : memref<4x8xf32>) outs(%[[DST]] : memref<4x8xf32>)
// CHECK:         return
func.func @copy_to_out_param(%src: memref<4x8xf32>, %dst: memref<4x8xf32>) {
  memref.copy %src, %dst : memref<4x8xf32> to memref<4x8xf32>
  return
}

// A strided view (the KV-cache slot a decode step writes) keeps its layout.
// CHECK-LABEL: func.func @copy_into_subview
// CHECK:         %[[SV:.*]] = memref.subview
// CHECK-NOT:     memref.copy
// CHECK:         linalg.copy {{.*}}ins(%{{.*}} : memref<2x16xf32>) outs(%[[SV]] : memref<2x16xf32, strided<[1024, 1], offset: ?>>)
func.func @copy_into_subview(%k: memref<2x16xf32>, %cache: memref<2x64x16xf32>, %pos: index) {
  %sv = memref.subview %cache[0, %pos, 0] [2, 1, 16] [1, 1, 1]
      : memref<2x64x16xf32> to memref<2x16xf32, strided<[1024, 1], offset: ?>>
  memref.copy %k, %sv : memref<2x16xf32> to memref<2x16xf32, strided<[1024, 1], offset: ?>>
  return
}
