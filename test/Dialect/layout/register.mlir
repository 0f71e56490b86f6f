// RUN: vt-opt %s | vt-opt | filecheck %s
// RUN: vt-opt %s --split-input-file --verify-diagnostics

// Register layouts (Tilus §4, Appendix A) as builtin dictionaries: modes per dimension (outer to
// inner), spatial/local = mode indices, most significant first. layout.reinterpret is Tilus `View`.

// Fig. 2(c): 32 threads x 3 u8 = 32 threads x 4 i6 (24 bits per thread). The i6 tile is the
// mma.m16n8k16 B operand, local(2,1).column_spatial(4,8).local(2,1).
// CHECK-LABEL: func.func @fig2c
// CHECK:         %[[V:.*]] = "layout.reinterpret"(%{{.*}}) {dst_layout = {local = array<i64: 0, 2>, modes = array<i64: 2, 4, 2, 8>, shape = array<i64: 16, 8>, spatial = array<i64: 3, 1>}, src_layout = {local = array<i64: 1>, modes = array<i64: 32, 3>, shape = array<i64: 96>, spatial = array<i64: 0>}} : (tensor<96xi8>) -> tensor<16x8xi6>
// CHECK:         return %[[V]]
func.func @fig2c(%b: tensor<96xi8>) -> tensor<16x8xi6> {
  %0 = "layout.reinterpret"(%b) {
      src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>, local = array<i64: 1>},
      dst_layout = {shape = array<i64: 16, 8>, modes = array<i64: 2, 4, 2, 8>, spatial = array<i64: 3, 1>, local = array<i64: 0, 2>}}
      : (tensor<96xi8>) -> tensor<16x8xi6>
  return %0 : tensor<16x8xi6>
}

// -----

// 32 threads x 2 u8 = 32 threads x 4 fp4 (16 bits per thread); 32 x 3 u8 = 32 x 4 e2m3 (!vt.float).
// CHECK-LABEL: func.func @to_fp4
// CHECK:         "layout.reinterpret"
// CHECK-SAME:      (tensor<64xi8>) -> tensor<16x8xf4E2M1FN>
// CHECK-LABEL: func.func @vt_float
// CHECK:         "layout.reinterpret"
// CHECK-SAME:      (tensor<96xi8>) -> tensor<128x!vt.float<2 : i64, 3 : i64, "finite">>
func.func @to_fp4(%b: tensor<64xi8>) -> tensor<16x8xf4E2M1FN> {
  %0 = "layout.reinterpret"(%b) {
      src_layout = {shape = array<i64: 64>, modes = array<i64: 32, 2>, spatial = array<i64: 0>, local = array<i64: 1>},
      dst_layout = {shape = array<i64: 16, 8>, modes = array<i64: 2, 8, 4, 2>, spatial = array<i64: 1, 2>, local = array<i64: 0, 3>}}
      : (tensor<64xi8>) -> tensor<16x8xf4E2M1FN>
  return %0 : tensor<16x8xf4E2M1FN>
}
func.func @vt_float(%b: tensor<96xi8>) -> tensor<128x!vt.float<2, 3, "finite">> {
  %0 = "layout.reinterpret"(%b) {
      src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>, local = array<i64: 1>},
      dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<128x!vt.float<2, 3, "finite">>
  return %0 : tensor<128x!vt.float<2, 3, "finite">>
}

// -----

// A register layout in layout.produced (produced_layouts() decodes it to a RegisterLayout).
// CHECK-LABEL: func.func @annotated
// CHECK:         layout.produced = [{local = array<i64: 0>, modes = array<i64: 4>, shape = array<i64: 4>, spatial = array<i64>}]
func.func @annotated(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %x, %x {layout.produced = [{shape = array<i64: 4>, modes = array<i64: 4>, spatial = array<i64>, local = array<i64: 0>}]} : tensor<4xf32>
  return %0 : tensor<4xf32>
}
