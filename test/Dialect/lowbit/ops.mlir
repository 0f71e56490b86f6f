// RUN: vt-opt %s | vt-opt | filecheck %s

// A sub-byte tensor as subbyte-pack writes it round-trips (generic form).

// CHECK-LABEL: func.func @codes
// CHECK:         "lowbit.unpack"(%{{.*}}) {dtype = "i3", position = #{{.*}}, tile_layout = ""} : (tensor<7xi8>) -> tensor<8x2xi3>
// CHECK:         "lowbit.unpack"(%{{.*}}) {dtype = "e2m1", position = #{{.*}}, tile_layout = "local(2, 1).spatial(4, 2)"} : (tensor<8xi8>) -> tensor<8x2xf4E2M1FN>
// CHECK:         "lowbit.unpack"(%{{.*}}) {dtype = "table4", position = #{{.*}}, tile_layout = ""} : (tensor<4xi8>) -> tensor<8xi4>
func.func @codes(%p: tensor<7xi8>, %q: tensor<8xi8>, %r: tensor<4xi8>) -> (tensor<8x2xi3>, tensor<8x2xf4E2M1FN>, tensor<8xi4>) {
  %a = "lowbit.unpack"(%p) {dtype = "i3", position = affine_map<(d0, d1) -> (d1 * 8 + d0)>, tile_layout = ""} : (tensor<7xi8>) -> tensor<8x2xi3>
  %b = "lowbit.unpack"(%q) {dtype = "e2m1", position = affine_map<(d0, d1) -> ((d1 + (d0 mod 4) * 2) * 2 + d0 floordiv 4)>, tile_layout = "local(2, 1).spatial(4, 2)"} : (tensor<8xi8>) -> tensor<8x2xf4E2M1FN>
  %c = "lowbit.unpack"(%r) {dtype = "table4", position = affine_map<(d0) -> (d0)>, tile_layout = ""} : (tensor<4xi8>) -> tensor<8xi4>
  return %a, %b, %c : tensor<8x2xi3>, tensor<8x2xf4E2M1FN>, tensor<8xi4>
}
