// RUN: vt-opt %s --codegen-gpu-sink-workgroup-buffers | filecheck %s

// A shared-memory tile allocated on the host side (workgroup promotion) moves to the start of the
// one launch using it, its deallocation dropped; its 64-byte rows (32 f16) get 16 more bytes against
// ldmatrix bank conflicts, since every user is an indexed, in-bounds access.
// CHECK-LABEL: func.func @tile_buffer
// CHECK-NOT:     memref.alloc
// CHECK:         gpu.launch
// CHECK-NEXT:      %[[T:.*]] = memref.alloc() : memref<16x40xf16, #gpu.address_space<workgroup>>
// CHECK:           vector.transfer_write %{{.*}}, %[[T]][%{{.*}}, %{{.*}}] {in_bounds = [true]} : vector<8xf16>, memref<16x40xf16, #gpu.address_space<workgroup>>
// CHECK:           gpu.terminator
// CHECK-NOT:     memref.dealloc
// CHECK:         return
func.func @tile_buffer(%x: memref<64x32xf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %pad = ub.poison : f16
  %tile = memref.alloc() : memref<16x32xf16, #gpu.address_space<workgroup>>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
    %v = vector.transfer_read %x[%tx, %c0], %pad {in_bounds = [true]} : memref<64x32xf16>, vector<8xf16>
    vector.transfer_write %v, %tile[%c0, %c0] {in_bounds = [true]} : vector<8xf16>, memref<16x32xf16, #gpu.address_space<workgroup>>
    gpu.terminator
  }
  memref.dealloc %tile : memref<16x32xf16, #gpu.address_space<workgroup>>
  return
}
