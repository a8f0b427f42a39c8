// Separable resampling of 4-D tensors in one pass (a Resize of any size: nearest, bilinear, bicubic): every output
// value sums, over the taps of its row and of its column (at most 4 each), the input value at those taps times the
// two weights, in float32, and is written once in the output's type. Indices and weights are per output row and
// column, (taps, size) each, as the resize layer keeps them on the device. In NHWC the channel is the
// fastest index, so neighbouring threads read neighbouring channels of one pixel.
#include <cuda_fp16.h>

template <typename T, typename W>
__global__ void resize_taps(const T* __restrict__ x, T* __restrict__ y, const long long* __restrict__ ih,
                            const W* __restrict__ wh, int th, const long long* __restrict__ iw,
                            const W* __restrict__ ww, int tw, int c, int hin, int win, int hout, int wout,
                            int nhwc, int weighted, long long total) {
    // weighted: bit 0 the rows have weights, bit 1 the columns (nearest has none: weight 1)
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    int ch, ox, oy;
    long long b, r;
    if (nhwc) {
        ch = (int)(i % c); r = i / c; ox = (int)(r % wout); r /= wout; oy = (int)(r % hout); b = r / hout;
    } else {
        ox = (int)(i % wout); r = i / wout; oy = (int)(r % hout); r /= hout; ch = (int)(r % c); b = r / c;
    }
    float acc = 0.f;
    for (int a = 0; a < th; ++a) {
        long long sy = ih[a * hout + oy];
        float wy = (weighted & 1) ? (float)wh[a * hout + oy] : 1.f;
        for (int k = 0; k < tw; ++k) {
            long long sx = iw[k * wout + ox];
            long long src = nhwc ? ((b * hin + sy) * win + sx) * c + ch : ((b * c + ch) * hin + sy) * win + sx;
            float wx = (weighted & 2) ? (float)ww[k * wout + ox] : 1.f;
            acc += wy * wx * (float)x[src];
        }
    }
    y[i] = (T)acc;
}
