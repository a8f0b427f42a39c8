"""The depthwise convolution's vector tile: up to DEPTHWISE_TILE output pixels of one output row times one vector of
channels, the sums kept in vector registers over the filter's cells, generated as LLVM IR (AVX-512 or AVX2 with
FMA) as the panel micro-kernel is. :mod:`engine.backends.cpu.depthwise` drives it."""
from __future__ import annotations

from typing import Any

from llvmlite import ir as llvm_ir
from numba import njit, types
from numba.extending import intrinsic

from engine.backends.cpu.microkernel import (
    PANEL_VECTOR,
    epilogue_ir,
    incoming,
    lane_mask,
    masked_intrinsics,
    outlined,
    phis,
    vector_intrinsics,
)

#: output pixels of the widest tile: eight accumulators hide the fused multiply-add's latency, and with the cell's
#: filter vector and an input vector they fit AVX2's sixteen registers
DEPTHWISE_TILE = 8
#: floats per vector (the channels a tile sums at once)
DEPTHWISE_VECTOR = PANEL_VECTOR


def _make_tile(nt: int, nc: int, cells: int = 0, gap: int = 0, masked: bool = False) -> Any:
    """The tile of ``nt`` output pixels times ``nc`` vectors of channels (see ``dw_tile``); ``cells`` (3 or 5): for a
    window of ``cells`` x ``cells`` cells all inside the image, unrolled; ``gap`` (with ``cells``): for pixels
    ``gap`` cells apart (``xpix`` = ``gap`` x ``xcol``), each input vector loaded once for every cell it meets;
    ``masked``: the channels of a last, partial vector (see ``_tile_codegen``)."""

    def _tile(typingctx, x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, groups):  # pragma: no cover
        return outlined(f"dw_tile{nt}x{nc}_{cells}_{gap}" + ("_masked" if masked else ""),
                        *_tile_codegen(nt, nc, cells, gap, masked))

    # one name each: Numba keys intrinsics by name
    _tile.__name__ = _tile.__qualname__ = (f"_dw_tile{nt}x{nc}" + (f"_cells{cells}" if cells else "")
                                           + (f"_gap{gap}" if gap else "") + ("_masked" if masked else ""))
    return intrinsic(_tile)


def _tile_codegen(nt: int, nc: int, cells: int = 0, gap: int = 0, masked: bool = False) -> Any:
    """For each group g < ``groups`` of ``nc`` vectors of channels (V = DEPTHWISE_VECTOR floats each), and each
    vector u of it, at byte offset o = 4 V (g nc + u): y_t[o] = epilogue(bias[o] + sum over i < ni, j < nj of
    X(x + o + t * xpix + i * xrow + j * xcol) * W(w + o + i * wrow + j * wcol)) for the ``nt`` pixels t, stored at
    y + o + t * ypix; every argument an int64 (an address, a count or a step in bytes). ``nt`` x ``nc``
    accumulators, each cell's filter vectors loaded once for the ``nt`` pixels; the loop over the channels inside,
    so that the addresses are worked out once per tile (a call per vector of channels spent more on them than on
    the sums). A tile of few pixels sums several vectors of channels at once: one chain of dependent multiply-adds
    per pixel left a window at an image's edge waiting on their latency (480 channels at 14x14: the two edge pixels
    of a row took as long as its twelve inside). The epilogue's four float32 values (lo, hi, slope, offset) at
    ``epi`` are those of ``microkernel.fused_epilogue``.

    ``cells`` (3 or 5): ``ni`` and ``nj`` are both ``cells`` (a window inside the image), and the loops over them
    are unrolled: with loops, the three cells of a 3x3 filter's row ran as one pass of a loop unrolled by two plus a
    remainder, and their bookkeeping (the accumulators' phi nodes, the addresses of eight pixels reloaded from the
    stack) outweighed the multiply-adds: 8.5 of AVX2's 32 floating-point operations a cycle with the data in L1.

    ``gap`` (with ``cells``): the pixels are ``gap`` cells apart (a stride of ``gap`` without
    dilation, or equal ones), so pixel t's cell j reads input column t ``gap`` + j of the row: each column is loaded
    once and multiplied into every pixel whose window holds it (10 loads a filter row for eight pixels of a 3x3
    window at stride 1, 17 at stride 2, instead of 24), the row's filter vectors loaded first. Each pixel's sum
    takes its cells in the same order, so the results are those of the other tiles, bit for bit.

    ``masked`` (with ``nc`` = 1): the last argument is not a count of vectors but of channels, fewer than V, summed as
    one vector whose loads and stores are masked to them (AVX-512's mask registers: a masked-off lane is neither read
    nor written). Without it those channels went pixel by pixel through Numba's loops, and on AVX-512, where a vector
    is 16 channels, mobile networks' 72, 120, 184 and 200 leave 8: mobilenet_v3_large's 72-channel 3x3 layer at
    56x56 took five times ONNX Runtime's time."""
    sig = types.void(*([types.int64] * 14))
    width = DEPTHWISE_VECTOR
    unrolled = cells

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        f32, i64 = llvm_ir.FloatType(), llvm_ir.IntType(64)
        vec = llvm_ir.VectorType(f32, width)
        pv = vec.as_pointer()
        fma = vector_intrinsics(builder, vec)[2]
        x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, nvec = args  # (ni, nj: see ``cells``)
        step = 4 * width  # bytes per vector
        zero, one = llvm_ir.Constant(i64, 0), llvm_ir.Constant(i64, 1)
        epi_p = builder.inttoptr(epi, f32.as_pointer())
        if masked:
            mask = lane_mask(builder, width, nvec)
            masked_load, masked_store = masked_intrinsics(builder, vec)
            align, nothing = llvm_ir.Constant(llvm_ir.IntType(32), 4), llvm_ir.Constant(vec, [0.0] * width)

        def load(address: Any) -> Any:
            if masked:
                return builder.call(masked_load, [builder.inttoptr(address, pv), align, mask, nothing])
            value = builder.load(builder.inttoptr(address, pv))
            value.align = 4
            return value

        def save(value: Any, address: Any) -> None:
            if masked:
                builder.call(masked_store, [value, builder.inttoptr(address, pv), align, mask])
            else:
                builder.store(value, builder.inttoptr(address, pv)).align = 4

        entry = builder.block
        vec_head = builder.append_basic_block("dw_vector")
        if not unrolled:
            row_head = builder.append_basic_block("dw_row")
            cell = builder.append_basic_block("dw_cell")
            row_next = builder.append_basic_block("dw_row_next")
        store = builder.append_basic_block("dw_store")
        done = builder.append_basic_block("dw_done")
        cells_inside = builder.and_(builder.icmp_signed(">", ni, zero), builder.icmp_signed(">", nj, zero))
        builder.cbranch(builder.icmp_signed(">", nvec, zero), vec_head, done)
        # one vector of channels
        builder.position_at_end(vec_head)
        v = builder.phi(i64)
        v.add_incoming(zero, entry)
        o = builder.mul(v, llvm_ir.Constant(i64, step * nc))
        starts = [load(builder.add(bias, builder.add(o, llvm_ir.Constant(i64, step * u)))) for u in range(nc)]
        start = [starts[q % nc] for q in range(nt * nc)]  # accumulator q: pixel q // nc, vector q % nc
        x_v, w_v = builder.add(x, o), builder.add(w, o)
        if unrolled and gap:  # every cell in line, each input column loaded once (see ``gap``)
            new = list(start)
            for ci in range(unrolled):
                w_i = builder.add(w_v, builder.mul(llvm_ir.Constant(i64, ci), wrow))
                filt = [[load(builder.add(builder.add(w_i, builder.mul(llvm_ir.Constant(i64, cj), wcol)),
                                          llvm_ir.Constant(i64, step * u))) for u in range(nc)]
                        for cj in range(unrolled)]
                x_i = builder.add(x_v, builder.mul(llvm_ir.Constant(i64, ci), xrow))
                for col in range((nt - 1) * gap + unrolled):
                    x_col = builder.add(x_i, builder.mul(llvm_ir.Constant(i64, col), xcol))
                    values = [load(builder.add(x_col, llvm_ir.Constant(i64, step * u))) for u in range(nc)]
                    for cj in range(min(col, unrolled - 1), -1, -1):  # pixels in order, each cell after the last
                        t, rest = divmod(col - cj, gap)
                        if rest == 0 and t < nt:
                            for u in range(nc):
                                q = t * nc + u
                                new[q] = builder.call(fma, [values[u], filt[cj][u], new[q]])
            builder.branch(store)
        elif unrolled:  # every cell in line, the tile's pixels' addresses as offsets from each cell's
            new = start
            for ci in range(unrolled):
                for cj in range(unrolled):
                    w_ij = builder.add(w_v, builder.add(builder.mul(llvm_ir.Constant(i64, ci), wrow),
                                                        builder.mul(llvm_ir.Constant(i64, cj), wcol)))
                    filt = [load(builder.add(w_ij, llvm_ir.Constant(i64, step * u))) for u in range(nc)]
                    x_ij = builder.add(x_v, builder.add(builder.mul(llvm_ir.Constant(i64, ci), xrow),
                                                        builder.mul(llvm_ir.Constant(i64, cj), xcol)))
                    new = [builder.call(fma, [load(builder.add(builder.add(x_ij, builder.mul(
                        llvm_ir.Constant(i64, q // nc), xpix)), llvm_ir.Constant(i64, step * (q % nc)))),
                        filt[q % nc], new[q]]) for q in range(nt * nc)]
            builder.branch(store)
        else:
            builder.cbranch(cells_inside, row_head, store)
        if not unrolled:
            # a row of the filter's cells
            builder.position_at_end(row_head)
            i = builder.phi(i64)
            i.add_incoming(zero, vec_head)
            acc_i = phis(builder, vec, start, vec_head)
            x_i, w_i = builder.add(x_v, builder.mul(i, xrow)), builder.add(w_v, builder.mul(i, wrow))
            builder.branch(cell)
            # one cell: its filter vector times each pixel's input vector
            builder.position_at_end(cell)
            j = builder.phi(i64)
            j.add_incoming(zero, row_head)
            acc = phis(builder, vec, acc_i, row_head)
            w_ij = builder.add(w_i, builder.mul(j, wcol))
            filt = [load(builder.add(w_ij, llvm_ir.Constant(i64, step * u))) for u in range(nc)]
            x_ij = builder.add(x_i, builder.mul(j, xcol))
            new = []
            for t in range(nt):
                x_t = builder.add(x_ij, builder.mul(llvm_ir.Constant(i64, t), xpix))
                new += [builder.call(fma, [load(builder.add(x_t, llvm_ir.Constant(i64, step * u))), filt[u],
                                           acc[t * nc + u]]) for u in range(nc)]
            j_next = builder.add(j, one)
            j.add_incoming(j_next, cell)
            incoming(acc, new, cell)
            builder.cbranch(builder.icmp_signed("<", j_next, nj), cell, row_next)
            builder.position_at_end(row_next)
            i_next = builder.add(i, one)
            i.add_incoming(i_next, row_next)
            incoming(acc_i, new, row_next)
            builder.cbranch(builder.icmp_signed("<", i_next, ni), row_head, store)
        # the epilogue and the stores of this vector of channels
        builder.position_at_end(store)
        if unrolled:
            finals = new
        else:
            finals = phis(builder, vec, start, vec_head)
            incoming(finals, new, row_next)
        finals = epilogue_ir(builder, vec, epi_p, finals)
        y_v = builder.add(y, o)
        for q, final in enumerate(finals):
            y_t = builder.add(y_v, builder.mul(llvm_ir.Constant(i64, q // nc), ypix))
            address = builder.add(y_t, llvm_ir.Constant(i64, step * (q % nc)))
            save(final, address)
        v_next = builder.add(v, one)
        v.add_incoming(v_next, builder.block)  # the epilogue's last block
        builder.cbranch(builder.icmp_signed("<", v_next, one if masked else nvec), vec_head, done)
        builder.position_at_end(done)
        return context.get_dummy_value()

    return sig, codegen


#: the tiles' shapes, (pixels, vectors of channels): at most eight accumulators
_TILES = {(8, 1): _make_tile(8, 1), (4, 2): _make_tile(4, 2), (2, 4): _make_tile(2, 4), (1, 4): _make_tile(1, 4),
          (4, 1): _make_tile(4, 1), (2, 1): _make_tile(2, 1), (1, 1): _make_tile(1, 1)}
_dw8x1, _dw4x2, _dw2x4, _dw1x4, _dw4x1, _dw2x1, _dw1x1 = _TILES.values()
#: the widest tile with its window's cells unrolled, for 3x3 and 5x5 filters (mobile networks' depthwise layers)
_dw8x1_cells3, _dw8x1_cells5 = _make_tile(8, 1, 3), _make_tile(8, 1, 5)
#: the same with each input column loaded once, for pixels one or two cells apart (strides 1 and 2 undilated, or
#: a stride equal to the dilation)
_dw8x1_cells3_gap1, _dw8x1_cells3_gap2 = _make_tile(8, 1, 3, 1), _make_tile(8, 1, 3, 2)
_dw8x1_cells5_gap1, _dw8x1_cells5_gap2 = _make_tile(8, 1, 5, 1), _make_tile(8, 1, 5, 2)
#: the 4-pixel tile of two vectors of channels with its window's cells unrolled, on AVX-512 alone (UNROLLED_NT4: its
#: 5x5 form holds ten filter vectors, eight sums and two inputs, more than AVX2's sixteen registers): rows of fewer
#: than eight pixels inside (7x7 and 14x14 images) went by looped 4-, 2- and 1-pixel tiles, a 960-channel 5x5 layer
#: at 7x7 at 0.4 multiply-adds a cycle
UNROLLED_NT4 = DEPTHWISE_VECTOR == 16
_dw4x2_cells3, _dw4x2_cells5 = _make_tile(4, 2, 3), _make_tile(4, 2, 5)
_dw4x2_cells3_gap1, _dw4x2_cells3_gap2 = _make_tile(4, 2, 3, 1), _make_tile(4, 2, 3, 2)
_dw4x2_cells5_gap1, _dw4x2_cells5_gap2 = _make_tile(4, 2, 5, 1), _make_tile(4, 2, 5, 2)


#: the tiles of the channels of a last, partial vector (AVX-512), masked; 3x3 and 5x5 windows of pixels one or two
#: cells apart unrolled, others looped
_dw8x1_m, _dw4x1_m, _dw2x1_m, _dw1x1_m = (_make_tile(nt, 1, masked=True) for nt in (8, 4, 2, 1))
_dw8x1_cells3_gap1_m, _dw8x1_cells3_gap2_m = _make_tile(8, 1, 3, 1, True), _make_tile(8, 1, 3, 2, True)
_dw8x1_cells5_gap1_m, _dw8x1_cells5_gap2_m = _make_tile(8, 1, 5, 1, True), _make_tile(8, 1, 5, 2, True)
#: whether the channels past the last whole vector are summed by the masked tiles (AVX-512, whose mask registers
#: make a masked load or store one move), else pixel by pixel by the caller
MASKED_TAILS = DEPTHWISE_VECTOR == 16


@njit(inline="always")
def _window(unroll, ni, nj, xcol, xpix):  # pragma: no cover - compiled
    """Which unrolled tile takes an 8-pixel tile's window: 0 none (cells looped), else 10 x cells + gap (gap 0: the
    pixels' cells not one or two columns apart)."""
    if not unroll or ni != nj or (ni != 3 and ni != 5):
        return 0
    gap = 1 if unroll == 2 and xpix == xcol else 2 if unroll == 2 and xpix == 2 * xcol else 0
    return 10 * ni + gap


@njit(inline="always")
def dw_tile(nt, x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, nvec, unroll,
            tail):  # pragma: no cover
    """The tile of ``nt`` (1, 2, 4 or DEPTHWISE_TILE) output pixels over ``nvec`` vectors of channels: groups of
    DEPTHWISE_TILE / ``nt`` vectors at once, the vectors left over one at a time (a tile of no vectors does
    nothing); then, where ``tail`` is more than 0 (MASKED_TAILS), the ``tail`` channels after them as one masked
    vector."""
    nc = 1 if nt == 8 else 2 if nt == 4 else 4
    groups = nvec // nc
    o = groups * nc * 4 * DEPTHWISE_VECTOR  # the first vector left over, in bytes
    left = nvec - groups * nc
    if nt == 8:
        window = _window(unroll, ni, nj, xcol, xpix)
        if window == 31:
            _dw8x1_cells3_gap1(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, nvec)
        elif window == 32:
            _dw8x1_cells3_gap2(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, nvec)
        elif window == 30:
            _dw8x1_cells3(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, nvec)
        elif window == 51:
            _dw8x1_cells5_gap1(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, nvec)
        elif window == 52:
            _dw8x1_cells5_gap2(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, nvec)
        elif window == 50:
            _dw8x1_cells5(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, nvec)
        else:
            _dw8x1(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, nvec)
    elif nt == 4:
        window = _window(unroll, ni, nj, xcol, xpix) if UNROLLED_NT4 else 0
        if window == 31:
            _dw4x2_cells3_gap1(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, groups)
        elif window == 32:
            _dw4x2_cells3_gap2(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, groups)
        elif window == 30:
            _dw4x2_cells3(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, groups)
        elif window == 51:
            _dw4x2_cells5_gap1(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, groups)
        elif window == 52:
            _dw4x2_cells5_gap2(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, groups)
        elif window == 50:
            _dw4x2_cells5(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, groups)
        else:
            _dw4x2(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, groups)
        _dw4x1(x + o, xrow, xcol, xpix, w + o, wrow, wcol, ni, nj, bias + o, y + o, ypix, epi, left)
    elif nt == 2:
        _dw2x4(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, groups)
        _dw2x1(x + o, xrow, xcol, xpix, w + o, wrow, wcol, ni, nj, bias + o, y + o, ypix, epi, left)
    else:
        _dw1x4(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, groups)
        _dw1x1(x + o, xrow, xcol, xpix, w + o, wrow, wcol, ni, nj, bias + o, y + o, ypix, epi, left)
    if MASKED_TAILS and tail > 0:
        t = nvec * 4 * DEPTHWISE_VECTOR  # the tail's first channel, in bytes
        x, w, bias, y = x + t, w + t, bias + t, y + t
        if nt == 8:
            window = _window(unroll, ni, nj, xcol, xpix)
            if window == 31:
                _dw8x1_cells3_gap1_m(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, tail)
            elif window == 32:
                _dw8x1_cells3_gap2_m(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, tail)
            elif window == 51:
                _dw8x1_cells5_gap1_m(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, tail)
            elif window == 52:
                _dw8x1_cells5_gap2_m(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, tail)
            else:
                _dw8x1_m(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, tail)
        elif nt == 4:
            _dw4x1_m(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, tail)
        elif nt == 2:
            _dw2x1_m(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, tail)
        else:
            _dw1x1_m(x, xrow, xcol, xpix, w, wrow, wcol, ni, nj, bias, y, ypix, epi, tail)
