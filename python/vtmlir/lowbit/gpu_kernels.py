"""MLIR text of the two GPU quantised-matmul kernels (f16 activations x n-bit weights, f32
accumulate) that `gpu_matmul.QuantizedMatmulKernel` builds: the tensor-core kernel (`mma.sync
m16n8k16`) and the CUDA-core kernel (f32 FMA) — Tilus §3 Fig. 2, §4 layouts, §6 Fig. 8 and casting.

Both kernels load weights the same way, from the register layout of their weight tile (B = W^T,
k x n): the weights are packed ahead of time with `subbyte-pack`'s re-layout for that layout (Fig. 8,
`pack.position_map_text`), so every thread's 4 codes of one tile are 4n consecutive bits at stream
position `tile * (threads * 4) + 4 * thread` (tiles n-major). A thread does **one vector load** of the
8 bytes holding them (`vector<8xi8>`), **reinterprets** them as one i64 (`vector.bitcast`: Tilus
`View`, same thread, same bits), extracts each code with a shift and a mask, and **casts it in
registers** to f32 (`@convert`, filled in with `convert.emit_code_to_f32`) — `thread_codes`.

- mma (`mma_kernel_text`): wm x wn warps per block, one per 16 x 8 output tile; B tile 16 x 8 in
  the m16n8k16 B fragment layout `local(2, 1).column_spatial(4, 8).local(2, 1)`, staged per k step
  in shared memory (`workgroup` attribution, two `gpu.barrier`s) so the wm warps along M share one
  global read of it — the thread's vector load then reads shared memory; A fragment by four
  `vector<2xf16>` loads; C fragment `local(2, 1).spatial(8, 4).local(1, 2)`. The B operand is the
  code's **value** (minus the zero point), exact in f16 by the mma rule of gpu_matmul.py; the group
  scale is applied in f32 to the f32 partial sum of each group (K loop = groups x mma steps of 16
  inside a group), so the kernel computes with the exact dequantised weights.
- FMA (`fma_kernel_text`): tn threads (up to 4 warps; fewer for narrow N) per tm x tn output tile,
  C layout `local(tm, 1).spatial(1, tn)` (thread t owns output column t, tm rows); B tile 4 x tn in
  layout `spatial(1, tn).local(4, 1)` (thread t holds B[0..3, t]: its column's next 4 codes, no
  replication); A: each row's 4 f16 activations by one `vector<4xf16>` load (the same for every
  thread: a broadcast load). Each code is dequantised in f32 exactly like the reference,
  `(value - zero) * scale`, and accumulated with `llvm.intr.fma` (f32, `fma.rn.f32`; `math.fma`
  would call libdevice). Any type, group size and M.
"""

from __future__ import annotations

MMA_B_LAYOUT = "local(2, 1).column_spatial(4, 8).local(2, 1)"
MMA_C_LAYOUT = "local(2, 1).spatial(8, 4).local(1, 2)"
MMA_TILE_M, MMA_TILE_N, MMA_TILE_K = 16, 8, 16
FMA_TILE_K = 4


def fma_b_layout(tn: int) -> str:
    return f"spatial(1, {tn}).local({FMA_TILE_K}, 1)"


def fma_c_layout(tm: int, tn: int) -> str:
    return f"local({tm}, 1).spatial(1, {tn})"


def _header(name: str, m: int, n: int, k: int, kg: int, nbytes: int, zeros: bool) -> list[str]:
    zero_arg = f", %z: memref<{n}x{kg}xf32>" if zeros else ""
    return [f"gpu.module @{name}_module {{",
            "  func.func private @convert(%c: i32) -> f32",
            f"  gpu.func @{name}(%x: memref<{m}x{k}xf16>, %p: memref<{nbytes}xi8>, %s: memref<{n}x{kg}xf32>"
            f"{zero_arg}, %y: memref<{m}x{n}xf32>) kernel {{"]


def thread_codes(pos: str, bits: int, memref: str, out: str = "v", base: str | None = None) -> str:
    """Lines defining %{out}0..3 (f32): the 4 codes at stream position %{pos} of the byte buffer
    `memref` ("%name : type"; starting at byte %{base} when given): one vector load,
    reinterpretation as i64, shift/mask, in-register cast."""
    buffer, buffer_type = memref.split(" : ")
    byte = f"%{out}byte0" if base else f"%{out}byte"
    offset = f"\n      %{out}byte = arith.addi %{out}byte0, %{base} : index" if base else ""
    lines = [f"""
      %{out}bit = arith.muli %{pos}, %cbits : index
      {byte} = arith.divui %{out}bit, %c8 : index{offset}
      %{out}off = arith.remui %{out}bit, %c8 : index
      %{out}bytes = vector.load {buffer}[%{out}byte] : {buffer_type}, vector<8xi8>
      %{out}word1 = vector.bitcast %{out}bytes : vector<8xi8> to vector<1xi64>
      %{out}word = vector.extract %{out}word1[0] : i64 from vector<1xi64>
      %{out}off64 = arith.index_cast %{out}off : index to i64
      %{out}mine = arith.shrui %{out}word, %{out}off64 : i64"""]
    for i in range(4):
        lines.append(f"""
      %{out}sh{i} = arith.constant {i * bits} : i64
      %{out}w{i} = arith.shrui %{out}mine, %{out}sh{i} : i64
      %{out}m{i} = arith.andi %{out}w{i}, %mask : i64
      %{out}code{i} = arith.trunci %{out}m{i} : i64 to i32
      %{out}{i} = func.call @convert(%{out}code{i}) : (i32) -> f32""")
    return "".join(lines)


def _constants(bits: int, extra: dict[str, int]) -> str:
    consts = {"c0": 0, "c1": 1, "c2": 2, "c4": 4, "c8": 8, "c16": 16, "cbits": bits, **extra}
    lines = [f"\n    %{k} = arith.constant {v} : index" for k, v in consts.items()]
    lines.append(f"\n    %mask = arith.constant {(1 << bits) - 1} : i64")
    lines.append("\n    %zero = arith.constant 0.0 : f32")
    return "".join(lines)


def mma_kernel_text(name: str, bits: int, m: int, n: int, k: int, group: int, nbytes: int, zeros: bool,
                    warps_m: int = 1, warps_n: int = 1) -> str:
    """The tensor-core kernel: a block of warps_m x warps_n warps computes a (16 warps_m) x (8 warps_n)
    output tile, warp (wm, wn) its 16 x 8 part; each k step the block stages the packed B tiles of its
    warps_n n-tiles (16n bytes each, contiguous in the Fig. 8 order) in shared memory, so a B tile is
    read from global memory once per block and shared by the warps_m warps along M. Needs M % (16
    warps_m) = N % (8 warps_n) = 0, K % 16 = 0 and group % 16 = 0 (checked by the caller)."""
    kg, steps = k // group, group // MMA_TILE_K
    tile_bytes = MMA_TILE_K * MMA_TILE_N * bits // 8
    stride = tile_bytes + 8  # + the 8-byte window of the tile's last thread
    smem = f"memref<{warps_n * stride}xi8, #gpu.address_space<workgroup>>"
    lines = _header(name, m, n, k, kg, nbytes, zeros)
    lines[-1] = lines[-1].replace(") kernel {", f") workgroup(%smem : {smem}) kernel {{")
    lines.append(_constants(bits, {"ckg": kg, "csteps": steps, "ckt": k // MMA_TILE_K, "c32": 32,
                                   "cwn": warps_n, "cwm": warps_m, "cstride": stride, "ctile": tile_bytes,
                                   "ccopy": warps_n * tile_bytes, "cthreads": 32 * warps_m * warps_n}))
    lines.append("""
    %tid = gpu.thread_id x
    %lane = arith.remui %tid, %c32 : index
    %warp = arith.divui %tid, %c32 : index
    %wm = arith.divui %warp, %cwn : index
    %wn = arith.remui %warp, %cwn : index
    %bn = gpu.block_id x
    %bm = gpu.block_id y
    %bnw = arith.muli %bn, %cwn : index
    %tn = arith.addi %bnw, %wn : index
    %bmw = arith.muli %bm, %cwm : index
    %tm = arith.addi %bmw, %wm : index
    %grp = arith.divui %lane, %c4 : index
    %tig = arith.remui %lane, %c4 : index
    %tm16 = arith.muli %tm, %c16 : index
    %row = arith.addi %tm16, %grp : index
    %row8 = arith.addi %row, %c8 : index
    %tn8 = arith.muli %tn, %c8 : index
    %ncol = arith.addi %tn8, %grp : index
    %kq = arith.muli %tig, %c2 : index
    %lane4 = arith.muli %lane, %c4 : index
    %sbase = arith.muli %wn, %cstride : index
    %col = arith.addi %tn8, %kq : index
    %col1 = arith.addi %col, %c1 : index
    %r:4 = scf.for %g = %c0 to %ckg step %c1 iter_args(%a0 = %zero, %a1 = %zero, %a2 = %zero, %a3 = %zero) -> (f32, f32, f32, f32) {""")
    if zeros:
        lines.append("""
     %zp = memref.load %z[%ncol, %g] : memref<{n}x{kg}xf32>""".format(n=n, kg=kg))
    lines.append(f"""
     %gs = arith.muli %g, %csteps : index
     %part:4 = scf.for %st = %c0 to %csteps step %c1 iter_args(%q0 = %zero, %q1 = %zero, %q2 = %zero, %q3 = %zero) -> (f32, f32, f32, f32) {{
      %t = arith.addi %gs, %st : index
      gpu.barrier
      scf.for %i = %tid to %ccopy step %cthreads {{
        %cw = arith.divui %i, %ctile : index
        %cb = arith.remui %i, %ctile : index
        %ctn = arith.addi %bnw, %cw : index
        %ctile0 = arith.muli %ctn, %ckt : index
        %gtile = arith.addi %ctile0, %t : index
        %gtb = arith.muli %gtile, %ctile : index
        %gbyte = arith.addi %gtb, %cb : index
        %byte_v = memref.load %p[%gbyte] : memref<{nbytes}xi8>
        %scw = arith.muli %cw, %cstride : index
        %sidx = arith.addi %scw, %cb : index
        memref.store %byte_v, %smem[%sidx] : {smem}
      }}
      gpu.barrier
      %t16 = arith.muli %t, %c16 : index
      %kb = arith.addi %t16, %kq : index
      %kb8 = arith.addi %kb, %c8 : index
      %x0 = vector.load %x[%row, %kb] : memref<{m}x{k}xf16>, vector<2xf16>
      %x1 = vector.load %x[%row8, %kb] : memref<{m}x{k}xf16>, vector<2xf16>
      %x2 = vector.load %x[%row, %kb8] : memref<{m}x{k}xf16>, vector<2xf16>
      %x3 = vector.load %x[%row8, %kb8] : memref<{m}x{k}xf16>, vector<2xf16>""")
    lines.append(thread_codes("lane4", bits, f"%smem : {smem}", base="sbase"))
    for i in range(4):
        if zeros:  # v - z: integers of at most 9 bits, exact in f16
            lines.append(f"\n      %d{i} = arith.subf %v{i}, %zp : f32")
        else:
            lines.append(f"\n      %d{i} = arith.addf %v{i}, %zero : f32")
        lines.append(f"\n      %h{i} = arith.truncf %d{i} : f32 to f16")
    lines.append("""
      %b0 = vector.from_elements %h0, %h1 : vector<2xf16>
      %b1 = vector.from_elements %h2, %h3 : vector<2xf16>
      %acc = nvvm.mma.sync A[%x0, %x1, %x2, %x3] B[%b0, %b1] C[%q0, %q1, %q2, %q3]
        {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
        : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
      %e0 = llvm.extractvalue %acc[0] : !llvm.struct<(f32, f32, f32, f32)>
      %e1 = llvm.extractvalue %acc[1] : !llvm.struct<(f32, f32, f32, f32)>
      %e2 = llvm.extractvalue %acc[2] : !llvm.struct<(f32, f32, f32, f32)>
      %e3 = llvm.extractvalue %acc[3] : !llvm.struct<(f32, f32, f32, f32)>
      scf.yield %e0, %e1, %e2, %e3 : f32, f32, f32, f32
     }""")
    lines.append(f"""
     %s0 = memref.load %s[%col, %g] : memref<{n}x{kg}xf32>
     %s1 = memref.load %s[%col1, %g] : memref<{n}x{kg}xf32>
     %n0 = llvm.intr.fma(%part#0, %s0, %a0) : (f32, f32, f32) -> f32
     %n1 = llvm.intr.fma(%part#1, %s1, %a1) : (f32, f32, f32) -> f32
     %n2 = llvm.intr.fma(%part#2, %s0, %a2) : (f32, f32, f32) -> f32
     %n3 = llvm.intr.fma(%part#3, %s1, %a3) : (f32, f32, f32) -> f32
     scf.yield %n0, %n1, %n2, %n3 : f32, f32, f32, f32
    }}
    memref.store %r#0, %y[%row, %col] : memref<{m}x{n}xf32>
    memref.store %r#1, %y[%row, %col1] : memref<{m}x{n}xf32>
    memref.store %r#2, %y[%row8, %col] : memref<{m}x{n}xf32>
    memref.store %r#3, %y[%row8, %col1] : memref<{m}x{n}xf32>
    gpu.return
  }}
}}
""")
    return "".join(lines)


def fma_kernel_text(name: str, bits: int, m: int, n: int, k: int, group: int, nbytes: int, zeros: bool,
                    tm: int, tn: int) -> str:
    """The CUDA-core kernel: grid (N / tn, M / tm), tn threads; needs K % 4 = 0, tm | M, tn | N."""
    kg = k // group
    accs = [f"%a{r}" for r in range(tm)]
    f32s = ", ".join(["f32"] * tm)
    lines = _header(name, m, n, k, kg, nbytes, zeros)
    lines.append(_constants(bits, {"ck4": k // FMA_TILE_K, "ctile": FMA_TILE_K * tn, "ctm": tm, "ctn": tn,
                                   "cgroup": group}))
    lines.append("""
    %lane = gpu.thread_id x
    %bn = gpu.block_id x
    %bm = gpu.block_id y
    %ncol0 = arith.muli %bn, %ctn : index
    %ncol = arith.addi %ncol0, %lane : index
    %row0 = arith.muli %bm, %ctm : index
    %lane4 = arith.muli %lane, %c4 : index
    %tile0 = arith.muli %bn, %ck4 : index""")
    init = ", ".join(f"{a} = %zero" for a in accs)
    lines.append(f"""
    %r:{tm} = scf.for %t = %c0 to %ck4 step %c1 iter_args({init}) -> ({f32s}) {{
      %k0 = arith.muli %t, %c4 : index
      %tile = arith.addi %tile0, %t : index
      %tbase = arith.muli %tile, %ctile : index
      %pos = arith.addi %tbase, %lane4 : index""")
    lines.append(thread_codes("pos", bits, f"%p : memref<{nbytes}xi8>"))
    for i in range(4):
        lines.append(f"""
      %di{i} = arith.constant {i} : index
      %kk{i} = arith.addi %k0, %di{i} : index
      %g{i} = arith.divui %kk{i}, %cgroup : index
      %s{i} = memref.load %s[%ncol, %g{i}] : memref<{n}x{kg}xf32>""")
        if zeros:
            lines.append(f"""
      %z{i} = memref.load %z[%ncol, %g{i}] : memref<{n}x{kg}xf32>
      %vz{i} = arith.subf %v{i}, %z{i} : f32
      %w{i} = arith.mulf %vz{i}, %s{i} : f32""")
        else:
            lines.append(f"\n      %w{i} = arith.mulf %v{i}, %s{i} : f32")
    new = []
    for r in range(tm):
        lines.append(f"""
      %ri{r} = arith.constant {r} : index
      %xrow{r} = arith.addi %row0, %ri{r} : index
      %xv{r} = vector.load %x[%xrow{r}, %k0] : memref<{m}x{k}xf16>, vector<4xf16>""")
        acc = f"%a{r}"
        for i in range(4):
            lines.append(f"""
      %xh{r}_{i} = vector.extract %xv{r}[{i}] : f16 from vector<4xf16>
      %xf{r}_{i} = arith.extf %xh{r}_{i} : f16 to f32
      %f{r}_{i} = llvm.intr.fma(%xf{r}_{i}, %w{i}, {acc}) : (f32, f32, f32) -> f32""")
            acc = f"%f{r}_{i}"
        new.append(acc)
    lines.append(f"\n      scf.yield {', '.join(new)} : {f32s}\n    }}")
    for r in range(tm):
        lines.append(f"""
    %cr{r} = arith.constant {r} : index
    %orow{r} = arith.addi %row0, %cr{r} : index
    memref.store %r#{r}, %y[%orow{r}, %ncol] : memref<{m}x{n}xf32>""")
    lines.append("\n    gpu.return\n  }\n}\n")
    return "".join(lines)
