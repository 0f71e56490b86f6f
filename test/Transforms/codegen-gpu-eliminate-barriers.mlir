// RUN: vt-opt %s --codegen-gpu-eliminate-barriers | filecheck %s

// A k step as the contraction schedule maps it: the A tile's copy, a barrier, the B tile's copy, a
// barrier, the product. The barrier between the copies orders nothing (each reads global memory and
// writes its own shared buffer) and goes; the one before the product (it reads what other threads
// copied) and the one at the top of the step (the product of the step before read the buffers the
// copies overwrite) stay.
// CHECK-LABEL: func.func @tile_copies
// CHECK:         scf.for
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      {{.*}} = vector.transfer_read %arg0
// CHECK-NEXT:      vector.transfer_write {{.*}}, %[[A:[a-z_0-9]+]][
// CHECK-NEXT:      {{.*}} = vector.transfer_read %arg1
// CHECK-NEXT:      vector.transfer_write {{.*}}, %[[B:[a-z_0-9]+]][
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      {{.*}} = vector.transfer_read %[[A]][
func.func @tile_copies(%a: memref<64x64xf16>, %b: memref<64x64xf16>, %c: memref<64x64xf16>, %n: index, %t: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.0 : f16
  %wa = memref.alloc() : memref<16x16xf16, #gpu.address_space<workgroup>>
  %wb = memref.alloc() : memref<16x16xf16, #gpu.address_space<workgroup>>
  scf.for %i = %c0 to %n step %c1 {
    gpu.barrier
    %va = vector.transfer_read %a[%i, %t], %cst {in_bounds = [true]} : memref<64x64xf16>, vector<8xf16>
    vector.transfer_write %va, %wa[%t, %c0] {in_bounds = [true]} : vector<8xf16>, memref<16x16xf16, #gpu.address_space<workgroup>>
    gpu.barrier
    %vb = vector.transfer_read %b[%i, %t], %cst {in_bounds = [true]} : memref<64x64xf16>, vector<8xf16>
    vector.transfer_write %vb, %wb[%t, %c0] {in_bounds = [true]} : vector<8xf16>, memref<16x16xf16, #gpu.address_space<workgroup>>
    gpu.barrier
    %ra = vector.transfer_read %wa[%c0, %t], %cst {in_bounds = [true]} : memref<16x16xf16, #gpu.address_space<workgroup>>, vector<8xf16>
    %rb = vector.transfer_read %wb[%c0, %t], %cst {in_bounds = [true]} : memref<16x16xf16, #gpu.address_space<workgroup>>, vector<8xf16>
    %s = arith.addf %ra, %rb : vector<8xf16>
    vector.transfer_write %s, %c[%i, %t] {in_bounds = [true]} : vector<8xf16>, memref<64x64xf16>
  }
  return
}

// Kept: a barrier between a write of a shared buffer and a read of it (through a view); between a
// write of global memory and a read of another global buffer (they may alias); after an async
// copy's wait (which completes the writes the barrier makes visible).
// CHECK-LABEL: func.func @ordering_barriers
// CHECK-COUNT-5: gpu.barrier
// CHECK-NOT:     gpu.barrier
// CHECK:         return
func.func @ordering_barriers(%a: memref<64xf16>, %b: memref<64xf16>, %t: index) {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.0 : f16
  %w = memref.alloc() : memref<2x32xf16, #gpu.address_space<workgroup>>
  gpu.barrier
  %v = vector.transfer_read %a[%t], %cst {in_bounds = [true]} : memref<64xf16>, vector<8xf16>
  vector.transfer_write %v, %w[%c0, %t] {in_bounds = [true]} : vector<8xf16>, memref<2x32xf16, #gpu.address_space<workgroup>>
  gpu.barrier
  %row = memref.subview %w[0, 0] [1, 32] [1, 1] : memref<2x32xf16, #gpu.address_space<workgroup>> to memref<32xf16, strided<[1]>, #gpu.address_space<workgroup>>
  %r = vector.transfer_read %row[%t], %cst {in_bounds = [true]} : memref<32xf16, strided<[1]>, #gpu.address_space<workgroup>>, vector<8xf16>
  vector.transfer_write %r, %a[%t] {in_bounds = [true]} : vector<8xf16>, memref<64xf16>
  gpu.barrier
  %g = vector.transfer_read %b[%t], %cst {in_bounds = [true]} : memref<64xf16>, vector<8xf16>
  %token = nvgpu.device_async_copy %b[%t], %w[%c0, %t], 8 : memref<64xf16> to memref<2x32xf16, #gpu.address_space<workgroup>>
  %group = nvgpu.device_async_create_group %token
  nvgpu.device_async_wait %group
  gpu.barrier
  %x = vector.transfer_read %w[%c0, %t], %cst {in_bounds = [true]} : memref<2x32xf16, #gpu.address_space<workgroup>>, vector<8xf16>
  %y = arith.addf %x, %g : vector<8xf16>
  vector.transfer_write %y, %b[%t] {in_bounds = [true]} : vector<8xf16>, memref<64xf16>
  gpu.barrier
  return
}

// Two barriers with nothing that touches memory between them: the second goes.
// CHECK-LABEL: func.func @back_to_back
// CHECK:         gpu.barrier
// CHECK-NEXT:    arith.addi
// CHECK-NEXT:    {{.*}} = vector.transfer_read
func.func @back_to_back(%a: memref<64xf16>, %t: index) -> vector<8xf16> {
  %cst = arith.constant 0.0 : f16
  gpu.barrier
  %u = arith.addi %t, %t : index
  gpu.barrier
  %v = vector.transfer_read %a[%u], %cst {in_bounds = [true]} : memref<64xf16>, vector<8xf16>
  return %v : vector<8xf16>
}
