// The operation of the pooling kernel (cupy.ElementwiseKernel): one output value a thread reads its whole window
// (max or average, padding, NCHW or NHWC).
int t = (int)i, n, c, oh, ow;
if (nhwc) { c = t % C; t /= C; ow = t % Wo; t /= Wo; oh = t % Ho; n = t / Ho; }
else { ow = t % Wo; t /= Wo; oh = t % Ho; t /= Ho; c = t % C; n = t / C; }
float acc = is_max ? __int_as_float(0xff800000) : 0.0f;  // -inf
int count = 0;
for (int a = 0; a < kh; ++a) {
    int h = oh * sh - ph + a;
    if (h < 0 || h >= H) continue;
    for (int b = 0; b < kw; ++b) {
        int w = ow * sw - pw + b;
        if (w < 0 || w >= W) continue;
        float v = (float)x[nhwc ? (((n * H + h) * W + w) * C + c) : (((n * C + c) * H + h) * W + w)];
        acc = is_max ? ((v > acc || v != v) ? v : acc) : acc + v;  // NaN propagates like numpy.maximum
        ++count;
    }
}
if (!is_max) acc /= (float)(include_pad ? kh * kw : count);
y = (T)acc;
