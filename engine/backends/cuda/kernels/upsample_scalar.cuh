// The operation of the element-wise upsampling kernel (cupy.ElementwiseKernel, after upsample.cuh): any layout,
// one output value a thread, its indices divided out.
int t = (int)i, n, c, oh, ow;
int ct = c0 + c1;
if (nhwc) { c = t % ct; t /= ct; ow = t % Wo; t /= Wo; oh = t % Ho; n = t / Ho; }
else { ow = t % Wo; t /= Wo; oh = t % Ho; t /= Ho; c = t % ct; n = t / ct; }
if (c >= c0) {
    int k = c - c0;
    y = skip[nhwc ? (((n * Ho + oh) * Wo + ow) * c1 + k) : (((n * c1 + k) * Ho + oh) * Wo + ow)];
} else {
    int y0, y1, x0, x1;
    float ly, lx;
    source(oh, fh, H, bilinear, &y0, &y1, &ly);
    source(ow, fw, W, bilinear, &x0, &x1, &lx);
#define AT(h, w) ((float)x[nhwc ? (((n * H + (h)) * W + (w)) * c0 + c) : (((n * c0 + c) * H + (h)) * W + (w))])
    if (!bilinear) y = (T)AT(y0, x0);
    else y = (T)((1.0f - ly) * ((1.0f - lx) * AT(y0, x0) + lx * AT(y0, x1)) + ly * ((1.0f - lx) * AT(y1, x0) + lx * AT(y1, x1)));
#undef AT
}
