// RUN: vt-opt %s --vt-build-vtog='report=-' -o /dev/null 2>&1 | filecheck %s
// RUN: vt-opt %s --vt-build-vtog='report=%t.txt dot=%t.dot' | filecheck %s --check-prefix=IR
// RUN: filecheck %s --input-file=%t.txt
// RUN: filecheck %s --input-file=%t.dot --check-prefix=DOT
// RUN: vt-opt %s --vt-build-vtog='report=- target=cpu' -o /dev/null 2>&1 | filecheck %s --check-prefix=CPU
// RUN: not vt-opt %s --vt-build-vtog='target=tpu' -o /dev/null 2>&1 | filecheck %s --check-prefix=BAD

// The analysis leaves the IR alone.
// IR-LABEL: func.func @fig6_kv_update
// IR:         tensor.insert_slice

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// VTC Fig. 6: QKV projection (a) -> Split (b = the K part) -> Reshape (c) -> ScatterND into the
// K cache (d) -> consumer. The K cache is a graph input: no edge leaves it.
// CHECK-LABEL: vtog @fig6_kv_update: 9 nodes, 8 edges, 4 conflicts, 3 data-movement ops
// CHECK-NEXT:  node %arg0 : tensor<1x64xf32> = arg [input]
// CHECK-NEXT:  node %arg1 : tensor<64x96xf32> = arg [input]
// CHECK-NEXT:  node %arg2 : tensor<1x2x8x16xf32> = arg [input]
// CHECK-NEXT:  node %{{.*}} : tensor<1x96xf32> = linalg.fill
// CHECK-NEXT:  node %[[A:.*]] : tensor<1x96xf32> = linalg.matmul
// CHECK-NEXT:  node %extracted_slice : tensor<1x32xf32> = tensor.extract_slice
// CHECK-NEXT:  node %expanded : tensor<1x2x1x16xf32> = tensor.expand_shape
// CHECK-NEXT:  node %inserted_slice : tensor<1x2x8x16xf32> = tensor.insert_slice
// CHECK-NEXT:  node %{{.*}} : tensor<1x2x8x16xf32> = linalg.generic [output]
// Split: b virtual of a (Type I: one contiguous run), a virtual of b over the K columns only.
// CHECK-NEXT:  edge e0: %extracted_slice -> %[[A]] slice output-of-input full type I {{.*}} map (d0, d1) -> (d0, d1 + 32)
// CHECK-NEXT:  edge e1: %[[A]] -> %extracted_slice slice input-of-output partial type I {{.*}} on 32<=d1<64
// Reshape: both directions.
// CHECK-NEXT:  edge e2: %expanded -> %extracted_slice reshape output-of-input full type I
// CHECK-NEXT:  edge e3: %extracted_slice -> %expanded reshape input-of-output full type I {{.*}} map (d0, d1) -> (d0, d1 floordiv 16, 0, d1 mod 16)
// ScatterND: d reads c in the updated row and the cache elsewhere; c is written straight into d
// (rule 2, a 64-byte row: not a whole 128-byte CUDA transaction); d is the K cache updated in
// place (rule 1, Type I).
// CHECK-NEXT:  edge e4: %inserted_slice -> %expanded insert-slice output-of-input partial {{.*}} on 5<=d2<6
// CHECK-NEXT:  edge e5: %inserted_slice -> %arg2 insert-slice output-of-input partial {{.*}} on 0<=d2<5 | {{.*}} on 6<=d2<8
// CHECK-NEXT:  edge e6: %expanded -> %inserted_slice insert-slice input-of-output full type II (none, run 16 elt = 64 B, unit 128 B) map (d0, d1, d2, d3) -> (d0, d1, d2 + 5, d3)
// CHECK-NEXT:  edge e7: %inserted_slice -> %arg2 insert-slice in-place full in-place type I
// Conflict sets: b can be a view of a or of c, not both; c of b or of d; and Fig. 7's one-to-one
// violation on d: the in-place edge covers the row e4 maps elsewhere and the rows e5 reads.
// CHECK-NEXT:  S(%extracted_slice) = {(e0, e3)}
// CHECK-NEXT:  S(%expanded) = {(e2, e6)}
// CHECK-NEXT:  S(%inserted_slice) = {(e4, e7), (e5, e7)}
// CHECK-NEXT:  kept-physical %arg2 -> %inserted_slice insert-slice input-of-output: %arg2 is a graph input (Alg. 1 line 10)
func.func @fig6_kv_update(%x: tensor<1x64xf32>, %w: tensor<64x96xf32>, %kcache: tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<1x96xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<1x96xf32>) -> tensor<1x96xf32>
  %a = linalg.matmul ins(%x, %w : tensor<1x64xf32>, tensor<64x96xf32>) outs(%acc : tensor<1x96xf32>) -> tensor<1x96xf32>
  %b = tensor.extract_slice %a[0, 32] [1, 32] [1, 1] : tensor<1x96xf32> to tensor<1x32xf32>
  %c = tensor.expand_shape %b [[0], [1, 2, 3]] output_shape [1, 2, 1, 16] : tensor<1x32xf32> into tensor<1x2x1x16xf32>
  %d = tensor.insert_slice %c into %kcache[0, 0, 5, 0] [1, 2, 1, 16] [1, 1, 1, 1] : tensor<1x2x1x16xf32> into tensor<1x2x8x16xf32>
  %e = tensor.empty() : tensor<1x2x8x16xf32>
  %out = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%d : tensor<1x2x8x16xf32>) outs(%e : tensor<1x2x8x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<1x2x8x16xf32>
  return %out : tensor<1x2x8x16xf32>
}

// VTC Fig. 7: c = Concat(a, b), d = Transpose(c). Edges 1 (c -> a) and 2 (c -> b) cover disjoint
// halves of c and can be chosen together; edge 3 (c -> d) covers all of c and conflicts with both.
// CHECK-LABEL: vtog @fig7_conflicts: 7 nodes, 6 edges, 2 conflicts, 2 data-movement ops
// CHECK:       node %[[A7:.*]] : tensor<2x8xf32> = linalg.generic
// CHECK-NEXT:  node %[[B7:.*]] : tensor<4x8xf32> = linalg.generic
// CHECK:       edge e0: %concat -> %[[A7]] concat output-of-input partial type I {{.*}} on 0<=d0<2
// CHECK-NEXT:  edge e1: %concat -> %[[B7]] concat output-of-input partial type I {{.*}} on 2<=d0<6
// CHECK-NEXT:  edge e2: %[[A7]] -> %concat concat input-of-output full type I
// CHECK-NEXT:  edge e3: %[[B7]] -> %concat concat input-of-output full type I
// CHECK-NEXT:  edge e4: %transposed -> %concat transpose output-of-input full type II (none, run 1 elt
// CHECK-NEXT:  edge e5: %concat -> %transposed transpose input-of-output full type II
// CHECK-NEXT:  S(%concat) = {(e0, e5), (e1, e5)}
// CHECK-NOT:   S(
// CHECK-LABEL: vtog @dynamic_slice
// CHECK:       not-virtualisable tensor.extract_slice@{{.*}}vt-build-vtog.mlir:{{[0-9]+}}:{{[0-9]+}} slice output-of-input: dynamic offsets/sizes/strides: {{.*}} no symbols
func.func @fig7_conflicts(%x: tensor<2x8xf32>, %y: tensor<4x8xf32>) -> tensor<8x6xf32> {
  %ea = tensor.empty() : tensor<2x8xf32>
  %a = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x8xf32>) outs(%ea : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %eb = tensor.empty() : tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<4x8xf32>) outs(%eb : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.tanh %v : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %c = tensor.concat dim(0) %a, %b : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %et = tensor.empty() : tensor<8x6xf32>
  %d = linalg.transpose ins(%c : tensor<6x8xf32>) outs(%et : tensor<8x6xf32>) permutation = [1, 0]
  %out = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%d : tensor<8x6xf32>) outs(%et : tensor<8x6xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<8x6xf32>
  return %out : tensor<8x6xf32>
}

func.func @dynamic_slice(%x: tensor<8x4xf32>, %i: index) -> tensor<2x4xf32> {
  %s = tensor.extract_slice %x[%i, 0] [2, 4] [1, 1] : tensor<8x4xf32> to tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// DOT: digraph "vtog_fig6_kv_update" {
// DOT:   n2 [label="%arg2\ntensor<1x2x8x16xf32>\narg", style=filled, fillcolor="gray80"];
// DOT:   n7 [label="%inserted_slice\ntensor<1x2x8x16xf32>\ntensor.insert_slice\nS: e4×e7 e5×e7"];
// DOT:   n7 -> n6 [label="e4 insert-slice\noutput-of-input\ntype II", style=dashed, color="red"];
// DOT:   n7 -> n2 [label="e7 insert-slice\nin-place\ntype I", color="red"];
// DOT: digraph "vtog_fig7_conflicts" {

// With the CPU's 64-byte unit the 16-float KV row (64 B) is partially contiguous; on CUDA (128 B) it is not.
// CPU-LABEL: vtog @fig6_kv_update
// CPU:       edge e6: {{.*}} type II (partial, run 16 elt = 64 B, unit 64 B)
// BAD: error: vt-build-vtog: unknown target 'tpu' (expected one of cuda, cpu)
