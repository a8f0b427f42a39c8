"""The panel micro-kernel: a tile of up to PANEL_ROWS rows times a panel of PANEL output channels, its
accumulators kept in vector registers across the whole sum, generated as LLVM IR (AVX-512 or AVX2 with FMA),
which Numba's loops cannot be made to do. :mod:`engine.backends.cpu.panels` and the Winograd products use it."""
from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from engine.backends.cpu.epilogue import ERF_P, ERF_Q, PHI_SATURATED, SIGMOID_P, SIGMOID_Q, SIGMOID_SATURATED


def _vector_shape() -> tuple[int, int, int] | None:
    """The micro-kernel's shape on this CPU: (floats per vector register, vectors per tile row, tile rows), or
    None without FMA vectors (the BLAS path). AVX-512 (32 registers of 16 floats): 7 rows x 2 vectors, fourteen
    accumulators. AVX2 (16 registers of 8 floats): 6 rows x 2 vectors, twelve accumulators, two loads of the
    panel and one broadcast."""
    try:
        from llvmlite import binding  # noqa: PLC0415

        features = binding.get_host_cpu_features()
    except Exception:  # no feature query
        return None
    if features.get("avx512f"):
        return 16, 2, 7
    if features.get("avx2") and features.get("fma"):
        return 8, 2, 6
    return None


_SHAPE = _vector_shape()
#: output channels per panel, rows of the micro-kernel's tile, input values per pass over a panel (L2-sized)
PANEL_VECTOR, PANEL_VECTORS, PANEL_ROWS = _SHAPE or (16, 2, 7)
PANEL = PANEL_VECTOR * PANEL_VECTORS
PANEL_KBLOCK = 1024


def panels_available() -> bool:
    """Whether this CPU has the FMA vectors of the micro-kernel (AVX-512, or AVX2 with FMA)."""
    return _SHAPE is not None


def outlined(name: str, sig: Any, codegen: Any) -> tuple[Any, Any]:
    """An intrinsic's (signature, codegen) whose IR, ``codegen``'s for the int64 arguments of ``sig`` (void), is the
    body of a function of its own, defined once per LLVM module under ``name`` and called from each use. Emitted
    in place, a kernel calling the seven tile sizes of a dispatcher at several places held that many copies of the
    micro-kernel and its epilogue, each optimised by LLVM again in every kernel it was linked into (the whole first
    compile took a fifth more). ``noinline`` keeps it so, ``linkonce_odr`` keeps one copy where a kernel links several
    callees that define it; a call per tile or strip costs nothing beside its sums."""
    i64 = llvm_ir.IntType(64)
    fnty = llvm_ir.FunctionType(llvm_ir.VoidType(), [i64] * len(sig.args))

    def call(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        fn = cgutils.get_or_insert_function(builder.module, fnty, f"layerlab_{name}")
        if fn.is_declaration:
            fn.linkage = "linkonce_odr"
            fn.attributes.add("noinline")
            fn.attributes.add("nounwind")
            body = llvm_ir.IRBuilder(fn.append_basic_block("entry"))
            codegen(context, body, signature, list(fn.args))
            body.ret_void()
        builder.call(fn, args)
        return context.get_dummy_value()

    return sig, call


def phis(builder: Any, ty: Any, values: list[Any], block: Any) -> list[Any]:
    """One phi node of type ``ty`` per value, each taking its value when coming from ``block``."""
    nodes = [builder.phi(ty) for _ in values]
    incoming(nodes, values, block)
    return nodes


def incoming(nodes: list[Any], values: list[Any], block: Any) -> None:
    """Each phi node takes its value when coming from ``block``."""
    for phi, value in zip(nodes, values):
        phi.add_incoming(value, block)


def _make_tile(nr: int, nv: int = PANEL_VECTORS) -> Any:
    """The micro-kernel for tiles of ``nr`` rows (see ``tile_n``), ``nv`` vectors of each panel row."""

    def _tile(typingctx, rows_a, rows_c, bp, depth, outer, a_step, cols):  # pragma: no cover - compiled
        return outlined(f"tile{nr}_{nv}", *_tile_codegen(nr, nv=nv))

    _tile.__name__ = _tile.__qualname__ = f"_tile{nr}_{nv}"  # one name each: Numba keys intrinsics by name
    return intrinsic(_tile)


def _make_tile_bias(nr: int, nv: int = PANEL_VECTORS) -> Any:
    """The micro-kernel for tiles of ``nr`` rows that starts from a bias and ends with a clamp and a gate
    (``tile_bias_n``), ``nv`` vectors of each panel row."""

    def _tile(typingctx, rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols):  # pragma: no cover - compiled
        return outlined(f"tile_bias{nr}_{nv}", *_tile_codegen(nr, fused=True, nv=nv))

    _tile.__name__ = _tile.__qualname__ = f"_tile_bias{nr}_{nv}"
    return intrinsic(_tile)


def _tile_codegen(nr: int, fused: bool = False, nv: int = PANEL_VECTORS) -> Any:
    """C[r, 0:PANEL] += sum over o < outer, i < depth of A_r[o * a_step + i] * B[o * depth + i, 0:PANEL] for the
    ``nr`` rows r, where A_r are float32 rows at the addresses held in the int64 array at ``rows_a``
    (``a_step`` in bytes), C rows at those held at ``rows_c``, and B a contiguous panel of PANEL columns at ``bp``:
    ``nr`` x PANEL_VECTORS vector accumulators kept in registers across the whole sum (PANEL_VECTORS vector
    loads of B, one broadcast of A per row and ``nr`` x PANEL_VECTORS fused multiply-adds per step), which
    Numba's loops cannot be made to do. AVX-512: seven rows, resnet's 7x7 and 14x14 images are whole tiles (six
    rows ran 0.58 instead of 0.48 ms on 49 x 4608 x 512). ``outer`` > 1 sums over the rows of a convolution
    window in place (``a_step`` apart in the input), the accumulators staying in registers between them.

    ``fused``: two more arguments, the address of PANEL float32 bias values and that of the four float32 values
    (lo, hi, slope, offset) of :func:`fused_epilogue`. The accumulators start from the bias instead of C, and before
    the store each value v becomes ``min(max(v, lo), hi)`` (NaN kept), then, where ``slope`` is not zero,
    ``v * min(max(v * slope + offset, 0), 1)``: no activation, ReLU, the clamps (ReLU6) and hard-swish. C is then
    only written, which saves the two passes over the output panel of a single-call sum (the bias fill and the
    activation: about 0.6 ms of resnet18's RGB stem on one core; 1x1 layers with a ReLU6 at 112x112, 7x).

    ``nv`` < PANEL_VECTORS: only the first ``nv`` vectors of each panel row (rows still PANEL values apart) are
    summed and stored, C then ``nv`` * PANEL_VECTOR values wide: along a strip (:func:`_strip_codegen`), a last panel
    half-filled (24, 40, 72 or 120 output channels on AVX2) is summed straight into the output, where a tile of the
    thread's own cost its zero columns' products and a copy (72 -> 24 at 56x56 with a sum, 2 Zen 3 cores: 0.155
    against 0.218 ms; 24 -> 72 with a ReLU 0.188 against 0.222).

    The last argument, ``cols``, is how many of the ``nv`` * PANEL_VECTOR columns of C are the output's: where they
    are fewer (a last panel part-filled: K no multiple of the panel), C's (or the residual's) values are read and
    written under a mask (LLVM's masked loads and stores; AVX-512's mask registers), the columns past them neither
    read nor written, on a branch of its own, so that a whole panel's loads and stores stay plain. The panel's
    columns past K are zeros, so the sums need no mask. Before, such a panel went through a tile of the thread's own
    and a copy: on AVX-512 (32-column panels) mobilenet_v3_large's 64 -> 24 layer at 56x56 took twice ONNX Runtime's
    time."""
    sig = types.void(*([types.int64] * (9 if fused else 7)))

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i64 = llvm_ir.IntType(64)
        pi = i64.as_pointer()
        table_a, table_c = builder.inttoptr(args[0], pi), builder.inttoptr(args[1], pi)
        a_addr = [builder.load(builder.gep(table_a, [llvm_ir.Constant(i64, r)])) for r in range(nr)]
        c_addr = [builder.load(builder.gep(table_c, [llvm_ir.Constant(i64, r)])) for r in range(nr)]
        _emit_tile(builder, nr, nv, a_addr, c_addr, *args[2:6], *(args[6:8] if fused else (None, None)),
                   cols=args[-1])
        return context.get_dummy_value()

    return sig, codegen


def _make_strip(fused: bool, nv: int, residual: bool = False) -> Any:
    """The micro-kernel along a strip of rows at a constant step (see ``strip_n`` and ``strip_residual_n``)."""
    if residual:
        def _strip(typingctx, a, a_stride, c, c_stride, rows, bp, depth, bias, epi, r, r_stride,
                   cols):  # pragma: no cover - compiled
            return outlined(f"strip_residual_{nv}", *_strip_codegen(True, nv, True))
    else:
        def _strip(typingctx, a, a_stride, c, c_stride, rows, bp, depth, bias, epi, cols):  # pragma: no cover
            return outlined(f"strip{'_bias' if fused else ''}_{nv}", *_strip_codegen(fused, nv))

    _strip.__name__ = _strip.__qualname__ = f"_strip{'_residual' if residual else '_bias' if fused else ''}_{nv}"
    return intrinsic(_strip)


def _strip_codegen(fused: bool, nv: int, residual: bool = False) -> Any:
    """:func:`_tile_codegen` over the first ``rows`` // PANEL_ROWS * PANEL_ROWS rows of a strip whose rows r lie at
    ``a`` + r ``a_stride`` and ``c`` + r ``c_stride`` (bytes; ``outer`` 1), tile after tile inside one call: a 1x1
    convolution of stride 1, whose pixels are one such strip. Filling the row tables of each tile from Numba and
    calling the tile cost about as much as the sums of a short one (16 input channels: 16 -> 64 at 112x112,
    0.30 against 0.53 ms on 2 Zen 3 cores, mobilenet_v3_large's layer in the network; 24 -> 72 at 56x56 0.13 against
    0.21). Arguments all int64: a, a_stride, c, c_stride, rows, the panel, depth, the
    bias's address and the epilogue's (both unused unless ``fused``). ``residual``: two more, the residual's first
    row and its step (rows of PANEL columns, as C's): the sums start from bias + residual, so that a convolution's
    sum with its block input (a MobileNet's or a ResNet's block end) costs no pass of its own. The last argument is
    the tile's ``cols``."""
    sig = types.void(*([types.int64] * (12 if residual else 10)))

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i64 = llvm_ir.IntType(64)
        a, a_stride, c, c_stride, rows, bp, depth, bias, epi = args[:9]
        zero, one = llvm_ir.Constant(i64, 0), llvm_ir.Constant(i64, 1)
        tiles = builder.sdiv(rows, llvm_ir.Constant(i64, PANEL_ROWS))
        entry = builder.block
        head = builder.append_basic_block("strip_tile")
        done = builder.append_basic_block("strip_done")
        builder.cbranch(builder.icmp_signed(">", tiles, zero), head, done)
        builder.position_at_end(head)
        t = builder.phi(i64)
        t.add_incoming(zero, entry)
        first = builder.mul(t, llvm_ir.Constant(i64, PANEL_ROWS))
        a_addr = [builder.add(a, builder.mul(builder.add(first, llvm_ir.Constant(i64, r)), a_stride))
                  for r in range(PANEL_ROWS)]
        c_addr = [builder.add(c, builder.mul(builder.add(first, llvm_ir.Constant(i64, r)), c_stride))
                  for r in range(PANEL_ROWS)]
        r_addr = [builder.add(args[9], builder.mul(builder.add(first, llvm_ir.Constant(i64, r)), args[10]))
                  for r in range(PANEL_ROWS)] if residual else None
        _emit_tile(builder, PANEL_ROWS, nv, a_addr, c_addr, bp, depth, one, zero,
                   *((bias, epi) if fused else (None, None)), r_addr, args[-1])
        t_next = builder.add(t, one)
        t.add_incoming(t_next, builder.block)
        builder.cbranch(builder.icmp_signed("<", t_next, tiles), head, done)
        builder.position_at_end(done)
        return context.get_dummy_value()

    return sig, codegen


def _emit_tile(builder: Any, nr: int, nv: int, a_addr: list[Any], c_addr: list[Any], bp: Any, depth: Any, outer: Any,
               a_step: Any, bias: Any, epi: Any, r_addr: list[Any] | None = None, cols: Any = None) -> None:
    """The IR of one tile (:func:`_tile_codegen`) of rows at the int64 addresses ``a_addr`` and ``c_addr``; fused
    (from the bias, with the epilogue) where ``bias`` and ``epi`` are given, from bias + the residual rows at
    ``r_addr`` where those are given too; C's and the residual's columns from ``cols`` on (an int64 value) neither
    read nor written. Leaves the builder in its last block."""
    width = PANEL_VECTOR
    fused = bias is not None
    f32, i64, i32 = llvm_ir.FloatType(), llvm_ir.IntType(64), llvm_ir.IntType(32)
    vec = llvm_ir.VectorType(f32, width)
    pf, pv = f32.as_pointer(), vec.as_pointer()
    fma = vector_intrinsics(builder, vec)[2]
    parts = [builder.bitcast(builder.gep(builder.inttoptr(c, pf), [llvm_ir.Constant(i64, width * h)]), pv)
             for c in c_addr for h in range(nv)]
    panel = builder.inttoptr(bp, pf)
    zero = llvm_ir.Constant(i64, 0)
    masked_load, masked_store = masked_intrinsics(builder, vec)
    align, nothing = llvm_ir.Constant(i32, 4), llvm_ir.Constant(vec, [0.0] * width)

    def masks() -> list[Any]:  # vector h of each row: its columns before ``cols``
        return [lane_mask(builder, width, builder.sub(cols, llvm_ir.Constant(i64, width * h))) for h in range(nv)]

    def columns(whole: Any, part: Any) -> list[Any]:
        """``whole()``'s values where all nv vectors are columns of C, else ``part(masks)``'s, on two branches."""
        if cols is None:
            return whole()
        whole_block, part_block = builder.append_basic_block("tile_whole"), builder.append_basic_block("tile_part")
        joined = builder.append_basic_block("tile_columns")
        builder.cbranch(builder.icmp_signed("<", cols, llvm_ir.Constant(i64, width * nv)), part_block, whole_block)
        builder.position_at_end(whole_block)
        plain = whole()
        builder.branch(joined)
        builder.position_at_end(part_block)
        under_mask = part(masks())
        builder.branch(joined)
        builder.position_at_end(joined)
        out = []
        for a, b in zip(plain, under_mask):
            phi = builder.phi(vec)
            phi.add_incoming(a, whole_block)
            phi.add_incoming(b, part_block)
            out.append(phi)
        return out

    def load_columns(pointers: list[Any]) -> list[Any]:
        def whole() -> list[Any]:
            values = [builder.load(p) for p in pointers]
            for value in values:
                value.align = 4
            return values
        return columns(whole, lambda m: [builder.call(masked_load, [p, align, m[j % nv], nothing])
                                         for j, p in enumerate(pointers)])

    def store_columns(pointers: list[Any], values: list[Any]) -> None:
        def whole() -> list[Any]:
            for p, value in zip(pointers, values):
                builder.store(value, p).align = 4
            return []

        def part(m: list[Any]) -> list[Any]:
            for j, (p, value) in enumerate(zip(pointers, values)):
                builder.call(masked_store, [value, p, align, m[j % nv]])
            return []
        columns(whole, part)

    if fused:
        bias_p = builder.inttoptr(bias, pf)
        init = []
        for h in range(nv):
            value = builder.load(builder.bitcast(builder.gep(bias_p, [llvm_ir.Constant(i64, width * h)]), pv))
            value.align = 4
            init.append(value)
        start = [init[j % nv] for j in range(len(parts))]
        if r_addr is not None:  # accumulator j: row j // nv, vector j % nv
            residual = load_columns([builder.bitcast(builder.gep(builder.inttoptr(r_addr[j // nv], pf), [
                llvm_ir.Constant(i64, width * (j % nv))]), pv) for j in range(len(parts))])
            start = [builder.fadd(a, r) for a, r in zip(start, residual)]
    else:
        start = load_columns(parts)
    entry = builder.block
    head = builder.append_basic_block("tile_outer")
    inner = builder.append_basic_block("tile_inner")
    latch = builder.append_basic_block("tile_outer_next")
    done = builder.append_basic_block("tile_done")
    work = builder.and_(builder.icmp_signed(">", depth, zero), builder.icmp_signed(">", outer, zero))
    builder.cbranch(work, head, done)
    # outer loop: one row of the window (or the whole sum when outer is 1)
    builder.position_at_end(head)
    o = builder.phi(i64)
    o.add_incoming(zero, entry)
    acc_o = phis(builder, vec, start, entry)
    rows = [builder.inttoptr(builder.add(a, builder.mul(o, a_step)), pf) for a in a_addr]
    first = builder.mul(builder.mul(o, depth), llvm_ir.Constant(i64, PANEL))
    builder.branch(inner)
    # inner loop: one value of the tile's rows, against one row of the panel
    builder.position_at_end(inner)
    i = builder.phi(i64)
    i.add_incoming(zero, head)
    acc = phis(builder, vec, acc_o, head)
    offset = builder.add(first, builder.mul(i, llvm_ir.Constant(i64, PANEL)))
    b = []
    for h in range(nv):
        load = builder.load(builder.bitcast(builder.gep(panel, [builder.add(offset, llvm_ir.Constant(i64, width * h))]),
                                            pv))
        load.align = 4
        b.append(load)
    splat = llvm_ir.Constant(llvm_ir.VectorType(i32, width), [0] * width)
    new = []
    for r in range(len(a_addr)):
        one = builder.insert_element(llvm_ir.Constant(vec, llvm_ir.Undefined), builder.load(builder.gep(rows[r], [i])),
                                     llvm_ir.Constant(i32, 0))
        one = builder.shuffle_vector(one, llvm_ir.Constant(vec, llvm_ir.Undefined), splat)
        new += [builder.call(fma, [one, b[h], acc[nv * r + h]]) for h in range(nv)]
    step = builder.add(i, llvm_ir.Constant(i64, 1))
    i.add_incoming(step, inner)
    incoming(acc, new, inner)
    builder.cbranch(builder.icmp_signed("<", step, depth), inner, latch)
    builder.position_at_end(latch)
    o_next = builder.add(o, llvm_ir.Constant(i64, 1))
    o.add_incoming(o_next, latch)
    incoming(acc_o, new, latch)
    builder.cbranch(builder.icmp_signed("<", o_next, outer), head, done)
    builder.position_at_end(done)
    finals = phis(builder, vec, start, entry)  # every phi first: LLVM wants them at the top of the block
    incoming(finals, new, latch)
    if fused:
        finals = epilogue_ir(builder, vec, builder.inttoptr(epi, pf), finals)
    store_columns(parts, finals)


def epilogue_ir(builder: Any, vec: Any, epi: Any, values: list[Any]) -> list[Any]:
    """The fused epilogue of ``tile_bias_n`` on the accumulators ``values``: a clamp to [lo, hi] by selects on
    ordered comparisons (a NaN compares false and stays), then, on a branch taken where ``slope`` is not zero, the
    gate ``v * clamp(v * slope + offset, 0, 1)`` (an infinite v without a gate stays itself), or, on one taken where
    the fifth value is not zero, SiLU (:func:`_silu_ir`). The gate's five operations per vector, done and discarded
    by a select, had cost a ReLU6 depthwise tile a quarter of its time. The builder is left in the block that joins
    the branches."""
    f32, i32, i64 = llvm_ir.FloatType(), llvm_ir.IntType(32), llvm_ir.IntType(64)
    width = vec.count
    splat = llvm_ir.Constant(llvm_ir.VectorType(i32, width), [0] * width)

    def broadcast(value: Any, ty: Any) -> Any:
        one = builder.insert_element(llvm_ir.Constant(ty, llvm_ir.Undefined), value, llvm_ir.Constant(i32, 0))
        return builder.shuffle_vector(one, llvm_ir.Constant(ty, llvm_ir.Undefined), splat)

    lo, hi, slope, offset, silu = (builder.load(builder.gep(epi, [llvm_ir.Constant(i64, j)])) for j in range(5))
    lo_v, hi_v = broadcast(lo, vec), broadcast(hi, vec)
    clamped = []
    for v in values:
        v = builder.select(builder.fcmp_ordered("<", v, lo_v), lo_v, v)
        clamped.append(builder.select(builder.fcmp_ordered(">", v, hi_v), hi_v, v))
    gate = builder.append_basic_block("epilogue_gate")
    no_gate = builder.append_basic_block("epilogue_no_gate")
    silu_block = builder.append_basic_block("epilogue_silu")
    joined = builder.append_basic_block("epilogue_done")
    zero = llvm_ir.Constant(f32, 0.0)
    builder.cbranch(builder.fcmp_unordered("!=", slope, zero), gate, no_gate)
    builder.position_at_end(gate)
    slope_v, offset_v = broadcast(slope, vec), broadcast(offset, vec)
    zero_v, one_v = llvm_ir.Constant(vec, [0.0] * width), llvm_ir.Constant(vec, [1.0] * width)
    gated = []
    for v in clamped:
        g = builder.fadd(builder.fmul(v, slope_v), offset_v)
        g = builder.select(builder.fcmp_ordered("<", g, zero_v), zero_v, g)
        g = builder.select(builder.fcmp_ordered(">", g, one_v), one_v, g)
        gated.append(builder.fmul(v, g))
    builder.branch(joined)
    smooth = builder.append_basic_block("epilogue_smooth")
    gelu_block = builder.append_basic_block("epilogue_gelu")
    builder.position_at_end(no_gate)
    builder.cbranch(builder.fcmp_unordered("!=", silu, zero), smooth, joined)
    builder.position_at_end(smooth)
    builder.cbranch(builder.fcmp_ordered("==", silu, llvm_ir.Constant(f32, 2.0)), gelu_block, silu_block)
    builder.position_at_end(silu_block)
    silus = [_silu_ir(builder, vec, v) for v in clamped]
    builder.branch(joined)
    builder.position_at_end(gelu_block)
    gelus = [_gelu_ir(builder, vec, v) for v in clamped]
    builder.branch(joined)
    builder.position_at_end(joined)
    out = []
    for v, g, u, e in zip(clamped, gated, silus, gelus):
        phi = builder.phi(vec)
        phi.add_incoming(v, no_gate)
        phi.add_incoming(g, gate)
        phi.add_incoming(u, silu_block)
        phi.add_incoming(e, gelu_block)
        out.append(phi)
    return out


def vector_intrinsics(builder: Any, vec: Any) -> tuple[Any, Any, Any]:
    """LLVM's fabs, floor and fma on vectors of type ``vec``."""
    width = vec.count

    def fn(name: str, args: int) -> Any:
        return cgutils.get_or_insert_function(builder.module, llvm_ir.FunctionType(vec, [vec] * args),
                                              f"llvm.{name}.v{width}f32")
    return fn("fabs", 1), fn("floor", 1), fn("fma", 3)


def masked_intrinsics(builder: Any, vec: Any) -> tuple[Any, Any]:
    """LLVM's masked load (pointer, alignment, mask, values of the masked-off lanes) and masked store (value,
    pointer, alignment, mask) of float32 vectors of type ``vec``: on AVX-512 one move under a mask register, a
    masked-off lane neither read (no fault past an array's end) nor written."""
    width, i32 = vec.count, llvm_ir.IntType(32)
    pv, mask = vec.as_pointer(), llvm_ir.VectorType(llvm_ir.IntType(1), width)
    load = cgutils.get_or_insert_function(builder.module, llvm_ir.FunctionType(vec, [pv, i32, mask, vec]),
                                          f"llvm.masked.load.v{width}f32.p0")
    store = cgutils.get_or_insert_function(builder.module, llvm_ir.FunctionType(llvm_ir.VoidType(), [vec, pv, i32, mask]),
                                           f"llvm.masked.store.v{width}f32.p0")
    return load, store


def lane_mask(builder: Any, width: int, count: Any) -> Any:
    """The mask of a vector of ``width`` lanes whose first ``count`` (an int64 value) are on."""
    i32, i64 = llvm_ir.IntType(32), llvm_ir.IntType(64)
    lanes = llvm_ir.Constant(llvm_ir.VectorType(i64, width), list(range(width)))
    splat = builder.insert_element(llvm_ir.Constant(llvm_ir.VectorType(i64, width), llvm_ir.Undefined), count,
                                   llvm_ir.Constant(i32, 0))
    splat = builder.shuffle_vector(splat, splat, llvm_ir.Constant(llvm_ir.VectorType(i32, width), [0] * width))
    return builder.icmp_signed("<", lanes, splat)


def _sigmoid_ir(builder: Any, vec: Any, v: Any) -> Any:
    """The sigmoid of a float32 vector as ``epilogue._sigmoid_rational`` computes it, step for step: the rational form
    ``SIGMOID_P`` / ``SIGMOID_Q`` of v clamped to +-SIGMOID_SATURATED, clamped to [0, 1]. NaN stays NaN (the clamps
    are selects on ordered comparisons)."""
    width = vec.count

    def const(value: float) -> Any:
        return llvm_ir.Constant(vec, [value] * width)

    _, _, fma = vector_intrinsics(builder, vec)
    x = builder.select(builder.fcmp_ordered("<", v, const(-SIGMOID_SATURATED)), const(-SIGMOID_SATURATED), v)
    x = builder.select(builder.fcmp_ordered(">", x, const(SIGMOID_SATURATED)), const(SIGMOID_SATURATED), x)
    s = builder.fmul(x, x)
    p = const(SIGMOID_P[0])
    for c in SIGMOID_P[1:]:
        p = builder.call(fma, [p, s, const(c)])
    q = const(SIGMOID_Q[0])
    for c in SIGMOID_Q[1:]:
        q = builder.call(fma, [q, s, const(c)])
    y = builder.fadd(builder.fdiv(builder.fmul(x, p), q), const(0.5))
    y = builder.select(builder.fcmp_ordered("<", y, const(0.0)), const(0.0), y)
    return builder.select(builder.fcmp_ordered(">", y, const(1.0)), const(1.0), y)


def _silu_ir(builder: Any, vec: Any, v: Any) -> Any:
    """SiLU ``v * sigmoid(v)`` of a float32 vector as ``epilogue.activate_span`` computes it (:func:`_sigmoid_ir`). NaN
    stays NaN; -inf gives ``-inf * 0``, NaN, as ``v / (1 + exp(-v))`` does."""
    return builder.fmul(v, _sigmoid_ir(builder, vec, v))


def _gelu_ir(builder: Any, vec: Any, v: Any) -> Any:
    """GELU ``v * Phi(v)`` of a float32 vector as ``epilogue._phi`` computes it, step for step (x = v / sqrt(2)
    clamped to +-4, erf by the rational form ``ERF_P`` / ``ERF_Q``, Phi exactly 0 and 1 beyond |x| = 3.9), so the
    micro-kernel's GELU equals the passes'. NaN stays NaN; -inf gives ``-inf * 0``, NaN, there too."""
    width = vec.count

    def const(value: float) -> Any:
        return llvm_ir.Constant(vec, [value] * width)

    _, _, fma = vector_intrinsics(builder, vec)
    x = builder.fmul(v, const(0.70710678118654752))
    x = builder.select(builder.fcmp_ordered("<", x, const(4.0)), x, const(4.0))  # NaN -> 4 (v keeps it)
    x = builder.select(builder.fcmp_ordered(">", x, const(-4.0)), x, const(-4.0))
    s = builder.fmul(x, x)
    p = const(ERF_P[0])
    for c in ERF_P[1:]:
        p = builder.call(fma, [p, s, const(c)])
    q = const(ERF_Q[0])
    for c in ERF_Q[1:]:
        q = builder.call(fma, [q, s, const(c)])
    erf = builder.fdiv(builder.fmul(x, p), q)
    phi = builder.call(fma, [const(0.5), erf, const(0.5)])
    phi = builder.select(builder.fcmp_ordered("<", x, const(-PHI_SATURATED)), const(0.0), phi)
    phi = builder.select(builder.fcmp_ordered(">", x, const(PHI_SATURATED)), const(1.0), phi)
    return builder.fmul(v, phi)


#: the epilogue codes (``epilogue.FUSED_EPILOGUES``) :func:`fused_epilogue` gives the micro-kernel's form: none,
#: ReLU, clamp, hard-swish, SiLU, GELU
MICROKERNEL_EPILOGUES = frozenset({0, 1, 5, 6, 8, 9})


def fused_epilogue(act: int, alpha: Any) -> np.ndarray:
    """The (lo, hi, slope, offset, kind: 1 SiLU, 2 GELU) float32 values of ``tile_bias_n``'s epilogue
    (:func:`epilogue_ir`) for code ``act`` (one of MICROKERNEL_EPILOGUES; ``alpha`` as ``epilogue.epilogue_alpha``
    gives it: clamp's (min, max))."""
    inf = np.inf
    if act == 1:
        return np.array([0.0, inf, 0.0, 0.0, 0.0], np.float32)
    if act == 5:
        return np.array([alpha[0], alpha[1], 0.0, 0.0, 0.0], np.float32)
    if act == 6:
        return np.array([-inf, inf, 1.0 / 6.0, 0.5, 0.0], np.float32)
    if act == 8:
        return np.array([-inf, inf, 0.0, 0.0, 1.0], np.float32)
    if act == 9:
        return np.array([-inf, inf, 0.0, 0.0, 2.0], np.float32)
    if act != 0:
        raise ValueError(f"epilogue code {act} is not one the micro-kernel applies")
    return np.array([-inf, inf, 0.0, 0.0, 0.0], np.float32)


_tile1, _tile2, _tile3, _tile4, _tile5, _tile6, _tile7 = (_make_tile(r) for r in range(1, 8))
_tile1_1, _tile2_1, _tile3_1, _tile4_1, _tile5_1, _tile6_1, _tile7_1 = (_make_tile(r, 1) for r in range(1, 8))
_tile_bias1, _tile_bias2, _tile_bias3, _tile_bias4, _tile_bias5, _tile_bias6, _tile_bias7 = (
    _make_tile_bias(r) for r in range(1, 8))
#: the same over the first vector of each panel row alone: a last panel of at most PANEL_VECTOR columns (an RGB stem
#: of 16 outputs on AVX-512) sums no zero columns
_tile_bias1_1, _tile_bias2_1, _tile_bias3_1, _tile_bias4_1, _tile_bias5_1, _tile_bias6_1, _tile_bias7_1 = (
    _make_tile_bias(r, 1) for r in range(1, 8))
_strip_2, _strip_1, _strip_bias_2, _strip_bias_1 = (_make_strip(f, v) for f in (False, True) for v in (PANEL_VECTORS, 1))
_strip_residual_2, _strip_residual_1 = (_make_strip(True, v, True) for v in (PANEL_VECTORS, 1))


@njit(inline="always")
def strip_residual_n(a, a_stride, c, c_stride, rows, bp, depth, bias, epi, r, r_stride, cols):  # pragma: no cover
    """:func:`strip_n` fused, its sums starting from the bias plus the residual rows at ``r`` (``r_stride`` apart)."""
    if cols <= PANEL_VECTOR:
        _strip_residual_1(a, a_stride, c, c_stride, rows, bp, depth, bias, epi, r, r_stride, cols)
    else:
        _strip_residual_2(a, a_stride, c, c_stride, rows, bp, depth, bias, epi, r, r_stride, cols)


@njit(inline="always")
def strip_n(fused, a, a_stride, c, c_stride, rows, bp, depth, bias, epi, cols):  # pragma: no cover - compiled
    """The micro-kernel along the first ``rows`` // PANEL_ROWS * PANEL_ROWS rows of a strip (rows at a constant
    step: ``_strip_codegen``), the first ``cols`` columns of the panel (its first vector alone where they fit in
    one); ``fused``: from the bias, with the epilogue (else adding to C)."""
    half = cols <= PANEL_VECTOR
    if fused and half:
        _strip_bias_1(a, a_stride, c, c_stride, rows, bp, depth, bias, epi, cols)
    elif fused:
        _strip_bias_2(a, a_stride, c, c_stride, rows, bp, depth, bias, epi, cols)
    elif half:
        _strip_1(a, a_stride, c, c_stride, rows, bp, depth, bias, epi, cols)
    else:
        _strip_2(a, a_stride, c, c_stride, rows, bp, depth, bias, epi, cols)


@njit(inline="always")
def tile_bias_n(nr, rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols):  # pragma: no cover - compiled
    """:func:`tile_n` starting from the PANEL bias values at address ``bias``, ending with the epilogue whose four
    values (:func:`fused_epilogue`) are at address ``epi``: C is only written, its first ``cols`` columns (the
    panel's first vector alone where they fit in one)."""
    if cols <= PANEL_VECTOR:
        if nr == 7:
            _tile_bias7_1(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
        elif nr == 6:
            _tile_bias6_1(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
        elif nr == 5:
            _tile_bias5_1(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
        elif nr == 4:
            _tile_bias4_1(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
        elif nr == 3:
            _tile_bias3_1(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
        elif nr == 2:
            _tile_bias2_1(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
        else:
            _tile_bias1_1(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
    elif nr == 7:
        _tile_bias7(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
    elif nr == 6:
        _tile_bias6(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
    elif nr == 5:
        _tile_bias5(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
    elif nr == 4:
        _tile_bias4(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
    elif nr == 3:
        _tile_bias3(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
    elif nr == 2:
        _tile_bias2(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)
    else:
        _tile_bias1(rows_a, rows_c, bp, depth, outer, a_step, bias, epi, cols)


@njit(inline="always")
def tile_n(nr, rows_a, rows_c, bp, depth, outer, a_step, cols):  # pragma: no cover - compiled
    """The micro-kernel on a tile of ``nr`` rows (1 to PANEL_ROWS), row addresses in the int64 arrays at
    ``rows_a`` and ``rows_c``, the first ``cols`` columns of C (the panel's first vector alone where they fit in
    one)."""
    if cols <= PANEL_VECTOR:
        if nr == 7:
            _tile7_1(rows_a, rows_c, bp, depth, outer, a_step, cols)
        elif nr == 6:
            _tile6_1(rows_a, rows_c, bp, depth, outer, a_step, cols)
        elif nr == 5:
            _tile5_1(rows_a, rows_c, bp, depth, outer, a_step, cols)
        elif nr == 4:
            _tile4_1(rows_a, rows_c, bp, depth, outer, a_step, cols)
        elif nr == 3:
            _tile3_1(rows_a, rows_c, bp, depth, outer, a_step, cols)
        elif nr == 2:
            _tile2_1(rows_a, rows_c, bp, depth, outer, a_step, cols)
        else:
            _tile1_1(rows_a, rows_c, bp, depth, outer, a_step, cols)
    elif nr == 7:
        _tile7(rows_a, rows_c, bp, depth, outer, a_step, cols)
    elif nr == 6:
        _tile6(rows_a, rows_c, bp, depth, outer, a_step, cols)
    elif nr == 5:
        _tile5(rows_a, rows_c, bp, depth, outer, a_step, cols)
    elif nr == 4:
        _tile4(rows_a, rows_c, bp, depth, outer, a_step, cols)
    elif nr == 3:
        _tile3(rows_a, rows_c, bp, depth, outer, a_step, cols)
    elif nr == 2:
        _tile2(rows_a, rows_c, bp, depth, outer, a_step, cols)
    else:
        _tile1(rows_a, rows_c, bp, depth, outer, a_step, cols)


@njit(inline="always")
def tile_rows(left):  # pragma: no cover - compiled
    """Rows of the next tile when ``left`` rows remain: full tiles, the last one exact. A remainder of one to
    three rows after a full tile is cut with it into two tiles of about half (a tile of fewer than four rows
    waits on its few accumulators' latency; AVX2's 49 pixels of a 7x7 image: 6 x 7 + 4 + 3, the time of about
    50 rows instead of 54 in nine full tiles)."""
    if left <= PANEL_ROWS or left >= PANEL_ROWS + 4:
        return min(left, PANEL_ROWS)
    return (left + 1) // 2

