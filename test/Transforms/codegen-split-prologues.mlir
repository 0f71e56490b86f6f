// RUN: vt-opt %s --codegen-split-prologues | filecheck %s

// The maps of @concat_batchnorm_conv1x1's kernels (printed before the functions).
// CHECK-DAG:     #[[GV:.*]] = affine_map<(d0, d1, d2, d3) -> (d3)>
// CHECK-DAG:     #[[GID:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG:     #[[GP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d3, d4)>

#x = affine_map<(d0, d1, d2) -> (d0, d2)>
#row = affine_map<(d0, d1, d2) -> (d0, 0)>
#col = affine_map<(d0, d1, d2) -> (d2)>
#w = affine_map<(d0, d1, d2) -> (d1, d2)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#in = affine_map<(n, f, h, w, c, kh, kw) -> (n, c, h + kh, w + kw)>
#chan = affine_map<(n, f, h, w, c, kh, kw) -> (c, 0, 0)>
#flt = affine_map<(n, f, h, w, c, kh, kw) -> (f, c, kh, kw)>
#out = affine_map<(n, f, h, w, c, kh, kw) -> (n, f, h, w)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#r2 = affine_map<(d0, d1) -> (d0)>
#cv = affine_map<(n, f, h, w, c) -> (c)>
#ck = affine_map<(n, f, h, w, c) -> (f, c)>
#cy = affine_map<(n, f, h, w, c) -> (n, f, h, w)>
#minus2 = affine_map<()[s0] -> (s0 - 2)>

// A LayerNorm's normalisation fused into the Linear after it: the normalisation moves into an
// elementwise kernel over x's shape (computed once per element, not once per output column), and
// the product becomes a plain contraction reading its buffer.
// CHECK-LABEL: func.func @layernorm_linear
// CHECK:         %[[T:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x32xf32>
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<8x32xf32>, memref<8x1xf32>, memref<32xf32>, memref<32xf32>) outs(%[[T]] : memref<8x32xf32>)
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      arith.subf
// CHECK-NEXT:      arith.mulf
// CHECK-NEXT:      arith.addf
// CHECK-NEXT:      linalg.yield
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[T]], %{{.*}} : memref<8x32xf32>, memref<16x32xf32>) outs(%{{.*}} : memref<8x16xf32>)
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[O:.*]]: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[O]], %[[M]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK:         memref.dealloc %[[T]] : memref<8x32xf32>
func.func @layernorm_linear(%x: memref<8x32xf32>, %mean: memref<8x1xf32>, %gamma: memref<32xf32>,
                            %beta: memref<32xf32>, %w: memref<16x32xf32>, %y: memref<8x16xf32>) {
  linalg.generic {indexing_maps = [#x, #row, #col, #col, #w, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %mean, %gamma, %beta, %w : memref<8x32xf32>, memref<8x1xf32>, memref<32xf32>, memref<32xf32>, memref<16x32xf32>)
      outs(%y : memref<8x16xf32>) {
  ^bb0(%in: f32, %m: f32, %g: f32, %b: f32, %wt: f32, %out: f32):
    %0 = arith.subf %in, %m : f32
    %1 = arith.mulf %0, %g : f32
    %2 = arith.addf %1, %b : f32
    %3 = arith.mulf %2, %wt : f32
    %4 = arith.addf %out, %3 : f32
    linalg.yield %4 : f32
  }
  return
}

// A BatchNorm + ReLU fused into a 1x1 convolution: the anchor is the input read through
// `h + kh`; the per-channel values are indexed by its channel dimension.
// CHECK-LABEL: func.func @batchnorm_conv1x1
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%{{.*}}, %{{.*}} : memref<1x4x6x6xf32>, memref<4x1x1xf32>) outs(%{{.*}} : memref<1x4x6x6xf32>)
// CHECK:           arith.maximumf
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : memref<1x4x6x6xf32>, memref<8x4x1x1xf32>) outs(%{{.*}} : memref<1x8x6x6xf32>)
// CHECK-NOT:       arith.maximumf
// CHECK:           linalg.yield
func.func @batchnorm_conv1x1(%x: memref<1x4x6x6xf32>, %scale: memref<4x1x1xf32>, %k: memref<8x4x1x1xf32>,
                             %y: memref<1x8x6x6xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#in, #chan, #flt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %scale, %k : memref<1x4x6x6xf32>, memref<4x1x1xf32>, memref<8x4x1x1xf32>) outs(%y : memref<1x8x6x6xf32>) {
  ^bb0(%in: f32, %s: f32, %f: f32, %out: f32):
    %0 = arith.mulf %in, %s : f32
    %1 = arith.maximumf %0, %zero : f32
    %2 = arith.mulf %1, %f : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// A residual sum and a scale over a 1x1 image fused into the 1x1 convolution after them: both addends
// are read through the window (the anchor and the other input read the same expressions), and the
// [C, 1, 1] scale, which needs no broadcast over a 1x1 image, through it too (its unit dimensions
// read index 0 whatever the expression). The prologue is one kernel over the addends' shape.
// CHECK-LABEL: func.func @residual_conv1x1_unit_image
// CHECK:         %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x4x1x1xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[ID:.*]], #{{.*}}, #{{.*}}, #[[ID]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0, %arg1, %arg2 : memref<2x4x1x1xf32>, memref<2x4x1x1xf32>, memref<4x1x1xf32>) outs(%[[P]] : memref<2x4x1x1xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[P]], %arg3 : memref<2x4x1x1xf32>, memref<8x4x1x1xf32>) outs(%arg4 : memref<2x8x1x1xf32>)
// CHECK:         memref.dealloc %[[P]]
func.func @residual_conv1x1_unit_image(%x: memref<2x4x1x1xf32>, %r: memref<2x4x1x1xf32>, %scale: memref<4x1x1xf32>,
                                       %k: memref<8x4x1x1xf32>, %y: memref<2x8x1x1xf32>) {
  linalg.generic {indexing_maps = [#in, #in, affine_map<(n, f, h, w, c, kh, kw) -> (c, h + kh, w + kw)>, #flt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %r, %scale, %k : memref<2x4x1x1xf32>, memref<2x4x1x1xf32>, memref<4x1x1xf32>, memref<8x4x1x1xf32>)
      outs(%y : memref<2x8x1x1xf32>) {
  ^bb0(%a: f32, %b: f32, %s: f32, %f: f32, %out: f32):
    %0 = arith.mulf %b, %s : f32
    %1 = arith.addf %a, %0 : f32
    %2 = arith.mulf %1, %f : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// The same over a 3x3 image: the second addend reads the anchor's window expressions.
// CHECK-LABEL: func.func @residual_conv1x1
// CHECK:         %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x4x3x3xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[ID:.*]], #[[ID]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0, %arg1 : memref<2x4x3x3xf32>, memref<2x4x3x3xf32>) outs(%[[P]] : memref<2x4x3x3xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[P]], %arg2 : memref<2x4x3x3xf32>, memref<8x4x1x1xf32>) outs(%arg3 : memref<2x8x3x3xf32>)
func.func @residual_conv1x1(%x: memref<2x4x3x3xf32>, %r: memref<2x4x3x3xf32>, %k: memref<8x4x1x1xf32>, %y: memref<2x8x3x3xf32>) {
  linalg.generic {indexing_maps = [#in, #in, #flt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %r, %k : memref<2x4x3x3xf32>, memref<2x4x3x3xf32>, memref<8x4x1x1xf32>) outs(%y : memref<2x8x3x3xf32>) {
  ^bb0(%a: f32, %b: f32, %f: f32, %out: f32):
    %1 = arith.addf %a, %b : f32
    %2 = arith.mulf %1, %f : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// Addends of different sizes read through the same window (a 4x4 buffer of which the 1x1 convolution
// reads 3x3): a prologue over either's shape would read the other out of bounds: left alone.
// CHECK-LABEL: func.func @residual_conv1x1_sizes
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic
// CHECK-NOT:     linalg.generic
func.func @residual_conv1x1_sizes(%x: memref<2x4x4x4xf32>, %r: memref<2x4x3x3xf32>, %k: memref<8x4x1x1xf32>, %y: memref<2x8x3x3xf32>) {
  linalg.generic {indexing_maps = [#in, #in, #flt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %r, %k : memref<2x4x4x4xf32>, memref<2x4x3x3xf32>, memref<8x4x1x1xf32>) outs(%y : memref<2x8x3x3xf32>) {
  ^bb0(%a: f32, %b: f32, %f: f32, %out: f32):
    %1 = arith.addf %a, %b : f32
    %2 = arith.mulf %1, %f : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// A sum of squares is a reduction, not a product of two operands: left alone.
// CHECK-LABEL: func.func @sum_of_squares
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic
// CHECK-NOT:     linalg.generic
func.func @sum_of_squares(%x: memref<8x32xf32>, %mean: memref<8xf32>, %y: memref<8xf32>) {
  linalg.generic {indexing_maps = [#id2, #r2, #r2], iterator_types = ["parallel", "reduction"]}
      ins(%x, %mean : memref<8x32xf32>, memref<8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %0 = arith.subf %in, %m : f32
    %1 = arith.mulf %0, %0 : f32
    %2 = arith.addf %out, %1 : f32
    linalg.yield %2 : f32
  }
  return
}

// A BatchNorm + ReLU of a concat VTC made virtual, fused into the 1x1 convolution after it: the
// convolution's input is no operand but a `memref.load` from each piece at indices computed from
// `linalg.index`, `arith.select` choosing one. The gather, the normalisation and the assert on the
// variance move into an elementwise kernel over the dimensions they read (n, h, w, c: the loads'
// indices and the variance's map), whose `linalg.index` ops are renumbered; the product reads its
// buffer as (n, h, w, c) and is a contraction.
// CHECK-LABEL: func.func @concat_batchnorm_conv1x1
// CHECK:         %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x4x4x4xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[GV]], #[[GID]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg2 : memref<4xf32>) outs(%[[P]] : memref<1x4x4x4xf32>)
// CHECK:           linalg.index 0 : index
// CHECK:           linalg.index 1 : index
// CHECK:           linalg.index 2 : index
// CHECK:           linalg.index 3 : index
// CHECK:           cf.assert
// CHECK:           memref.load %arg0
// CHECK:           memref.load %arg1
// CHECK:           arith.select
// CHECK:           arith.maximumf
// CHECK:         linalg.generic {indexing_maps = [#[[GP]], #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[P]], %arg3 : memref<1x4x4x4xf32>, memref<8x4xf32>) outs(%arg4 : memref<1x8x4x4xf32>)
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %[[O:.*]]: f32):
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[O]], %[[M]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK:         memref.dealloc %[[P]]
func.func @concat_batchnorm_conv1x1(%a: memref<1x2x4x4xf32>, %b: memref<1x2x4x4xf32>, %var: memref<4xf32>,
                                    %k: memref<8x4xf32>, %y: memref<1x8x4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#cv, #ck, #cy], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%var, %k : memref<4xf32>, memref<8x4xf32>) outs(%y : memref<1x8x4x4xf32>) {
  ^bb0(%v: f32, %f: f32, %out: f32):
    %n = linalg.index 0 : index
    %h = linalg.index 2 : index
    %w = linalg.index 3 : index
    %c = linalg.index 4 : index
    %s = math.sqrt %v : f32
    %ok = arith.cmpf one, %s, %zero : f32
    cf.assert %ok, "unimplemented: tensor with zero element"
    %cb = affine.apply #minus2()[%c]
    %cb0 = arith.maxsi %cb, %c0 : index
    %cb1 = arith.minsi %cb0, %c1 : index
    %ca = arith.minsi %c, %c1 : index
    %xa = memref.load %a[%n, %ca, %h, %w] : memref<1x2x4x4xf32>
    %xb = memref.load %b[%n, %cb1, %h, %w] : memref<1x2x4x4xf32>
    %second = arith.cmpi sge, %c, %c2 : index
    %x = arith.select %second, %xb, %xa : f32
    %0 = arith.divf %x, %s : f32
    %1 = arith.maximumf %0, %zero : f32
    %2 = arith.mulf %1, %f : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// A gather that reads the output buffer itself is not computed before the product: left alone.
// CHECK-LABEL: func.func @gather_of_the_output
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic
// CHECK-NOT:     linalg.generic
func.func @gather_of_the_output(%var: memref<4xf32>, %k: memref<8x4xf32>, %y: memref<1x8x4x4xf32>) {
  linalg.generic {indexing_maps = [#cv, #ck, #cy], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%var, %k : memref<4xf32>, memref<8x4xf32>) outs(%y : memref<1x8x4x4xf32>) {
  ^bb0(%v: f32, %f: f32, %out: f32):
    %n = linalg.index 0 : index
    %h = linalg.index 2 : index
    %w = linalg.index 3 : index
    %c = linalg.index 4 : index
    %x = memref.load %y[%n, %c, %h, %w] : memref<1x8x4x4xf32>
    %0 = arith.mulf %x, %v : f32
    %2 = arith.mulf %0, %f : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// The same, the input a buffer of the function whose last reader is the convolution (a TeMCO
// group's tile, freed right after): the prologue overwrites it in place, no new buffer.
// CHECK-LABEL: func.func @batchnorm_conv1x1_in_place
// CHECK:         %[[T:.*]] = memref.alloc() : memref<1x4x6x6xf32>
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%{{.*}} : memref<4x1x1xf32>) outs(%[[T]] : memref<1x4x6x6xf32>)
// CHECK:           arith.maximumf
// CHECK:         linalg.generic {{.*}} ins(%[[T]], %{{.*}} : memref<1x4x6x6xf32>, memref<8x4x1x1xf32>) outs(%{{.*}} : memref<1x8x6x6xf32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      arith.mulf
// CHECK-NEXT:      arith.addf
// CHECK:         memref.dealloc %[[T]]
// CHECK-NOT:     memref.dealloc
// CHECK:         return
func.func @batchnorm_conv1x1_in_place(%x: memref<1x4x6x6xf32>, %scale: memref<4x1x1xf32>, %k: memref<8x4x1x1xf32>,
                                      %y: memref<1x8x6x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<1x4x6x6xf32>
  memref.copy %x, %t : memref<1x4x6x6xf32> to memref<1x4x6x6xf32>
  linalg.generic {indexing_maps = [#in, #chan, #flt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%t, %scale, %k : memref<1x4x6x6xf32>, memref<4x1x1xf32>, memref<8x4x1x1xf32>) outs(%y : memref<1x8x6x6xf32>) {
  ^bb0(%in: f32, %s: f32, %f: f32, %out: f32):
    %0 = arith.mulf %in, %s : f32
    %1 = arith.maximumf %0, %zero : f32
    %2 = arith.mulf %1, %f : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  memref.dealloc %t : memref<1x4x6x6xf32>
  return
}

// Read after the convolution: a new buffer for the prologue.
// CHECK-LABEL: func.func @batchnorm_conv1x1_read_after
// CHECK:         %[[T:.*]] = memref.alloc() : memref<1x4x6x6xf32>
// CHECK:         %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x4x6x6xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[T]], %{{.*}} : memref<1x4x6x6xf32>, memref<4x1x1xf32>) outs(%[[P]] : memref<1x4x6x6xf32>)
func.func @batchnorm_conv1x1_read_after(%x: memref<1x4x6x6xf32>, %scale: memref<4x1x1xf32>, %k: memref<8x4x1x1xf32>,
                                        %y: memref<1x8x6x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<1x4x6x6xf32>
  memref.copy %x, %t : memref<1x4x6x6xf32> to memref<1x4x6x6xf32>
  linalg.generic {indexing_maps = [#in, #chan, #flt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%t, %scale, %k : memref<1x4x6x6xf32>, memref<4x1x1xf32>, memref<8x4x1x1xf32>) outs(%y : memref<1x8x6x6xf32>) {
  ^bb0(%in: f32, %s: f32, %f: f32, %out: f32):
    %0 = arith.mulf %in, %s : f32
    %1 = arith.maximumf %0, %zero : f32
    %2 = arith.mulf %1, %f : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  memref.copy %t, %x : memref<1x4x6x6xf32> to memref<1x4x6x6xf32>
  memref.dealloc %t : memref<1x4x6x6xf32>
  return
}
