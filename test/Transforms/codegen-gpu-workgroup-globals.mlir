// RUN: vt-opt %s --codegen-gpu-workgroup-globals | filecheck %s

// A kernel cannot call an allocator: each shared-memory allocation of a gpu.func becomes a private,
// 16-byte aligned workgroup global of its gpu.module, read with memref.get_global where it stood.
// CHECK-LABEL: gpu.module @kernels
// CHECK-DAG:     memref.global "private" @[[B:.*]] : memref<64xf32, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK-DAG:     memref.global "private" @[[A:.*]] : memref<2x16x24xf16, #gpu.address_space<workgroup>> {alignment = 16 : i64}
// CHECK:         gpu.func @staged
// CHECK-NOT:       memref.alloc
// CHECK:           memref.get_global @[[A]] : memref<2x16x24xf16, #gpu.address_space<workgroup>>
// CHECK:           %[[BV:.*]] = memref.get_global @[[B]] : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK:           vector.transfer_write %{{.*}}, %[[BV]]
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @staged(%x: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %pad = ub.poison : f32
      %a = memref.alloc() : memref<2x16x24xf16, #gpu.address_space<workgroup>>
      %b = memref.alloc() : memref<64xf32, #gpu.address_space<workgroup>>
      %v = vector.transfer_read %x[%c0], %pad {in_bounds = [true]} : memref<64xf32>, vector<4xf32>
      vector.transfer_write %v, %b[%c0] {in_bounds = [true]} : vector<4xf32>, memref<64xf32, #gpu.address_space<workgroup>>
      gpu.return
    }
  }
}
