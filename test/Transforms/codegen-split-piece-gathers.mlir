// RUN: vt-opt %s --codegen-split-piece-gathers | filecheck %s

#nchw = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#chan = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
#minus8 = affine_map<()[s0] -> (s0 - 8)>
#minus12 = affine_map<()[s0] -> (s0 - 12)>

// The maps of the piece kernels (printed before the functions).
// CHECK-DAG:     #[[CHAN:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
// CHECK-DAG:     #[[PIECE:.*]] = affine_map<(d0, d1, d2, d3) -> (0, d1, d2, d3)>
// CHECK-DAG:     #[[ID:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// BatchNorm + ReLU of a concat of three pieces along the channels (8 + 4 + 4) as VTC reads it
// element by element (vtc/select_views.py): every piece loaded at clamped indices, a chain of
// selects on the channel index keeps one. One elementwise kernel per piece: the channel vectors
// and the output are cut at the piece bounds, the piece is a plain input, no index arithmetic left.
// CHECK-LABEL: func.func @concat_batchnorm_relu
// CHECK-SAME:    (%[[P0:.*]]: memref<1x8x2x3xf32>, %[[P1:.*]]: memref<1x4x2x3xf32>, %[[P2:.*]]: memref<1x4x2x3xf32>, %[[MEAN:.*]]: memref<16x1x1xf32>, %[[RSTD:.*]]: memref<16x1x1xf32>, %[[Y:.*]]: memref<1x16x2x3xf32>)
// CHECK:         %[[M0:.*]] = memref.subview %[[MEAN]][0, 0, 0] [8, 1, 1] [1, 1, 1]
// CHECK:         %[[R0:.*]] = memref.subview %[[RSTD]][0, 0, 0] [8, 1, 1] [1, 1, 1]
// CHECK:         %[[Y0:.*]] = memref.subview %[[Y]][0, 0, 0, 0] [1, 8, 2, 3] [1, 1, 1, 1]
// CHECK:         linalg.generic {indexing_maps = [#[[CHAN]], #[[CHAN]], #[[PIECE]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
// CHECK-SAME:        ins(%[[M0]], %[[R0]], %[[P0]] : {{.*}}) outs(%[[Y0]] : {{.*}})
// CHECK-NEXT:    ^bb0(%[[M:.*]]: f32, %[[R:.*]]: f32, %[[X:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[D:.*]] = arith.subf %[[X]], %[[M]] : f32
// CHECK-NEXT:      %[[N:.*]] = arith.mulf %[[D]], %[[R]] : f32
// CHECK-NEXT:      %[[POS:.*]] = arith.cmpf ugt, %[[N]], %{{.*}} : f32
// CHECK-NEXT:      %[[RELU:.*]] = arith.select %[[POS]], %[[N]], %{{.*}} : f32
// CHECK-NEXT:      linalg.yield %[[RELU]] : f32
// CHECK:         %[[M1:.*]] = memref.subview %[[MEAN]][8, 0, 0] [4, 1, 1] [1, 1, 1]
// CHECK:         %[[Y1:.*]] = memref.subview %[[Y]][0, 8, 0, 0] [1, 4, 2, 3] [1, 1, 1, 1]
// CHECK:         linalg.generic
// CHECK-SAME:        ins(%[[M1]], %{{.*}}, %[[P1]] : {{.*}}) outs(%[[Y1]] : {{.*}})
// CHECK-NOT:       memref.load
// CHECK:           linalg.yield
// CHECK:         %[[M2:.*]] = memref.subview %[[MEAN]][12, 0, 0] [4, 1, 1] [1, 1, 1]
// CHECK:         %[[Y2:.*]] = memref.subview %[[Y]][0, 12, 0, 0] [1, 4, 2, 3] [1, 1, 1, 1]
// CHECK:         linalg.generic
// CHECK-SAME:        ins(%[[M2]], %{{.*}}, %[[P2]] : {{.*}}) outs(%[[Y2]] : {{.*}})
// CHECK-NOT:       memref.load
// CHECK:           linalg.yield
// CHECK-NOT:     linalg.generic
// CHECK:         return
func.func @concat_batchnorm_relu(%p0: memref<1x8x2x3xf32>, %p1: memref<1x4x2x3xf32>, %p2: memref<1x4x2x3xf32>,
                                 %mean: memref<16x1x1xf32>, %rstd: memref<16x1x1xf32>, %y: memref<1x16x2x3xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %c12 = arith.constant 12 : index
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#chan, #chan, #nchw], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%mean, %rstd : memref<16x1x1xf32>, memref<16x1x1xf32>) outs(%y : memref<1x16x2x3xf32>) {
  ^bb0(%m: f32, %r: f32, %out: f32):
    %c = linalg.index 1 : index
    %h = linalg.index 2 : index
    %w = linalg.index 3 : index
    %i2 = affine.apply #minus12()[%c]
    %i2a = arith.maxsi %i2, %c0 : index
    %i2b = arith.minsi %i2a, %c3 : index
    %ha = arith.maxsi %h, %c0 : index
    %hb = arith.minsi %ha, %c1 : index
    %wa = arith.maxsi %w, %c0 : index
    %wb = arith.minsi %wa, %c2 : index
    %v2 = memref.load %p2[%c0, %i2b, %hb, %wb] : memref<1x4x2x3xf32>
    %i1 = affine.apply #minus8()[%c]
    %i1a = arith.maxsi %i1, %c0 : index
    %i1b = arith.minsi %i1a, %c3 : index
    %v1 = memref.load %p1[%c0, %i1b, %hb, %wb] : memref<1x4x2x3xf32>
    %ge8 = arith.cmpi sge, %c, %c8 : index
    %lt12 = arith.cmpi slt, %c, %c12 : index
    %in1 = arith.andi %ge8, %lt12 : i1
    %s1 = arith.select %in1, %v1, %v2 : f32
    %i0a = arith.maxsi %c, %c0 : index
    %i0b = arith.minsi %i0a, %c7 : index
    %v0 = memref.load %p0[%c0, %i0b, %hb, %wb] : memref<1x8x2x3xf32>
    %ge0 = arith.cmpi sge, %c, %c0 : index
    %lt8 = arith.cmpi slt, %c, %c8 : index
    %in0 = arith.andi %ge0, %lt8 : i1
    %s0 = arith.select %in0, %v0, %s1 : f32
    %d = arith.subf %s0, %m : f32
    %n = arith.mulf %d, %r : f32
    %pos = arith.cmpf ugt, %n, %zero : f32
    %relu = arith.select %pos, %n, %zero : f32
    linalg.yield %relu : f32
  }
  return
}

// A piece read at an offset inside a larger buffer (channels 4..7 read rows 3..6 of an 8-row buffer):
// the piece kernel reads a subview of it.
// CHECK-LABEL: func.func @offset_piece
// CHECK-SAME:    (%[[A:.*]]: memref<1x4x2xf32>, %[[B:.*]]: memref<1x8x2xf32>, %[[O:.*]]: memref<1x8x2xf32>)
// CHECK:         %[[OA:.*]] = memref.subview %[[O]][0, 0, 0] [1, 4, 2] [1, 1, 1]
// CHECK:         linalg.generic {{.*}} ins(%[[A]] : memref<1x4x2xf32>) outs(%[[OA]] : {{.*}})
// CHECK:         %[[BV:.*]] = memref.subview %[[B]][0, 3, 0] [1, 4, 2] [1, 1, 1]
// CHECK:         %[[OB:.*]] = memref.subview %[[O]][0, 4, 0] [1, 4, 2] [1, 1, 1]
// CHECK:         linalg.generic {{.*}} ins(%[[BV]] : {{.*}}) outs(%[[OB]] : {{.*}})
// CHECK-NOT:       memref.load
// CHECK:           math.exp
func.func @offset_piece(%a: memref<1x4x2xf32>, %b: memref<1x8x2xf32>, %o: memref<1x8x2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c7 = arith.constant 7 : index
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      outs(%o : memref<1x8x2xf32>) {
  ^bb0(%out: f32):
    %c = linalg.index 1 : index
    %w = linalg.index 2 : index
    %ib = arith.subi %c, %c1 : index
    %iba = arith.maxsi %ib, %c0 : index
    %ibb = arith.minsi %iba, %c7 : index
    %vb = memref.load %b[%c0, %ibb, %w] : memref<1x8x2xf32>
    %ia = arith.minsi %c, %c3 : index
    %va = memref.load %a[%c0, %ia, %w] : memref<1x4x2xf32>
    %lt4 = arith.cmpi slt, %c, %c4 : index
    %v = arith.select %lt4, %va, %vb : f32
    %e = math.exp %v : f32
    linalg.yield %e : f32
  }
  return
}

// Left alone: a clamp that does change the index inside the range (channel 7 reads row 3 of the
// 4-row piece b), which the split cannot prove a no-op.
// CHECK-LABEL: func.func @clamp_is_needed
// CHECK-COUNT-1: linalg.generic
// CHECK:           memref.load %{{.*}} : memref<1x4x2xf32>
// CHECK:           memref.load %{{.*}} : memref<1x4x2xf32>
// CHECK:           arith.select
// CHECK-NOT:     linalg.generic
// CHECK:         return
func.func @clamp_is_needed(%a: memref<1x4x2xf32>, %b: memref<1x4x2xf32>, %o: memref<1x8x2xf32>) {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
      outs(%o : memref<1x8x2xf32>) {
  ^bb0(%out: f32):
    %c = linalg.index 1 : index
    %w = linalg.index 2 : index
    %ib = arith.subi %c, %c3 : index
    %ibb = arith.minsi %ib, %c3 : index
    %vb = memref.load %b[%c0, %ibb, %w] : memref<1x4x2xf32>
    %ia = arith.minsi %c, %c3 : index
    %va = memref.load %a[%c0, %ia, %w] : memref<1x4x2xf32>
    %lt4 = arith.cmpi slt, %c, %c4 : index
    %v = arith.select %lt4, %va, %vb : f32
    linalg.yield %v : f32
  }
  return
}

// Left alone: the conditions compare two dimensions (a mask, not piece bounds).
// CHECK-LABEL: func.func @two_dimensions
// CHECK-COUNT-1: linalg.generic
// CHECK:           memref.load
// CHECK:           arith.select
// CHECK-NOT:     linalg.generic
// CHECK:         return
func.func @two_dimensions(%a: memref<4x4xf32>, %o: memref<4x4xf32>) {
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      outs(%o : memref<4x4xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = memref.load %a[%i, %j] : memref<4x4xf32>
    %lo = arith.cmpi slt, %i, %c2 : index
    %left = arith.cmpi slt, %j, %c2 : index
    %both = arith.andi %lo, %left : i1
    %r = arith.select %both, %v, %zero : f32
    linalg.yield %r : f32
  }
  return
}
