// Bad pipelines are reported mlir-style and make vt-opt exit 1.
// RUN: not vt-opt %s --pass-pipeline='builtin.module(func.func(vt-stats))' 2>&1 | filecheck %s --check-prefix=NESTED
// RUN: not vt-opt %s --pass-pipeline='builtin.module(vt-stats, no-such-pass)' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not vt-opt %s --vt-stats='bogus=1' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not vt-opt %s --vt-stats='json=maybe' 2>&1 | filecheck %s --check-prefix=VALUE
// RUN: not vt-opt %s --no-such-pass 2>&1 | filecheck %s --check-prefix=FLAG
// RUN: not vt-opt %s --canonicalize='max-iterations=many' 2>&1 | filecheck %s --check-prefix=UPSTREAM

// NESTED: <pass-pipeline>:1:26: error: vtmlir pass 'vt-stats' runs on 'builtin.module' and cannot be nested under 'func.func'
// NESTED-NEXT: builtin.module(func.func(vt-stats))
// NESTED-NEXT: {{^}}                         ^
// UNKNOWN: <pass-pipeline>:1:26: error: 'no-such-pass' does not refer to a registered pass or pass pipeline
// OPTION: vt-opt: error: --vt-stats=bogus=1: no such option 'bogus' for pass 'vt-stats' (valid options: json, report, annotate)
// VALUE: vt-opt: error: --vt-stats=json=maybe: invalid value 'maybe' for option 'json' of pass 'vt-stats': expected a boolean
// FLAG: vt-opt: error: unknown command line option or pass '--no-such-pass'
// UPSTREAM: vt-opt: error: --canonicalize=max-iterations=many: invalid options 'max-iterations=many' for pass 'canonicalize'
func.func @f() {
  return
}
