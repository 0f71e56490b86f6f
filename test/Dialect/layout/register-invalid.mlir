// RUN: vt-opt %s --split-input-file --verify-diagnostics

// Every verifier error of layout.reinterpret and of the register layout encoding, one per split.
func.func @f(%x: tensor<96xi8>) -> tensor<128xi6> {
  // expected-error @+1 {{dst_layout must be a register layout, got {perm = array<i64: 0>}}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>, local = array<i64: 1>},
                                dst_layout = {perm = array<i64: 0>}}
      : (tensor<96xi8>) -> tensor<128xi6>
  return %0 : tensor<128xi6>
}

// -----

func.func @f(%x: tensor<96xi8>) -> tensor<128xi6> {
  // expected-error @+1 {{invalid src_layout: register layout misses local}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<128xi6>
  return %0 : tensor<128xi6>
}

// -----

func.func @f(%x: tensor<96xi8>) -> tensor<128xi6> {
  // expected-error @+1 {{invalid src_layout: unknown register layout key 'perm'}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>, local = array<i64: 1>, perm = array<i64: 0>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<128xi6>
  return %0 : tensor<128xi6>
}

// -----

func.func @f(%x: tensor<96xi8>) -> tensor<128xi6> {
  // expected-error @+1 {{invalid src_layout: modes [32, 4] do not factor shape [96] (dimension 0)}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<128xi6>
  return %0 : tensor<128xi6>
}

// -----

func.func @f(%x: tensor<96xi8>) -> tensor<128xi6> {
  // expected-error @+1 {{invalid src_layout: spatial [0] and local [0] must together list every mode 0..1 once}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>, local = array<i64: 0>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<128xi6>
  return %0 : tensor<128xi6>
}

// -----

func.func @f(%x: tensor<96xi8>) -> tensor<128xi6> {
  // expected-error @+1 {{invalid src_layout: register layout is not in canonical form (expected modes [96], spatial [], local [0])}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64>, local = array<i64: 0, 1>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<128xi6>
  return %0 : tensor<128xi6>
}

// -----

func.func @f(%x: tensor<96xi8>) -> tensor<128xi6> {
  // expected-error @+1 {{invalid src_layout: modes [32, 3, 1] must all be >= 2}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3, 1>, spatial = array<i64: 0>, local = array<i64: 1, 2>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<128xi6>
  return %0 : tensor<128xi6>
}

// -----

func.func @f(%x: tensor<96xi8>) -> tensor<64x2xi6> {
  // expected-error @+1 {{result shape [64, 2] differs from dst_layout shape [128]}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>, local = array<i64: 1>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<64x2xi6>
  return %0 : tensor<64x2xi6>
}

// -----

func.func @f(%x: tensor<97xi8>) -> tensor<128xi6> {
  // expected-error @+1 {{source shape [97] differs from src_layout shape [96]}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>, local = array<i64: 1>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<97xi8>) -> tensor<128xi6>
  return %0 : tensor<128xi6>
}

// -----

func.func @f(%x: tensor<96xi8>) -> tensor<128xi8> {
  // expected-error @+1 {{cannot reinterpret: bits per thread differ (3 x 8 = 24 vs 4 x 8 = 32)}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>, local = array<i64: 1>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<128xi8>
  return %0 : tensor<128xi8>
}

// -----

func.func @f(%x: tensor<96xi8>) -> tensor<128xi6> {
  // expected-error @+1 {{cannot reinterpret: thread counts differ (32 vs 16)}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>, local = array<i64: 1>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 16, 8>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<128xi6>
  return %0 : tensor<128xi6>
}

// -----

func.func @f(%x: tensor<96xi8>) -> tensor<128xindex> {
  // expected-error @+1 {{result element type index has no bit width}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>, local = array<i64: 1>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<128xindex>
  return %0 : tensor<128xindex>
}

// -----

func.func @f(%x: tensor<96xi8>) -> tensor<128x!vt.float<7, 3, "finite">> {
  // expected-error @+1 {{result element type: invalid !vt.float<7, 3, "finite">}}
  %0 = "layout.reinterpret"(%x) {src_layout = {shape = array<i64: 96>, modes = array<i64: 32, 3>, spatial = array<i64: 0>, local = array<i64: 1>},
                                dst_layout = {shape = array<i64: 128>, modes = array<i64: 32, 4>, spatial = array<i64: 0>, local = array<i64: 1>}}
      : (tensor<96xi8>) -> tensor<128x!vt.float<7, 3, "finite">>
  return %0 : tensor<128x!vt.float<7, 3, "finite">>
}
