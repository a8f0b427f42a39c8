// The operation of the tap-gathering kernel (cupy.ElementwiseKernel): z[n, i, j, (c, r, u)] = x[n, sh*i + r - ph,
// sw*j + u - pw, c] for the bh x bw block of taps (r, u), zero outside the image and past C*bh*bw channels.
int t = (int)i;
int q = t % Cz; t /= Cz;
int j = t % Wz; t /= Wz;
int r0 = t % Hz; int n = t / Hz;
T v = (T)0.0f;
if (q < C * bh * bw) {
    int c = q / (bh * bw), r = (q / bw) % bh, u = q % bw;
    int h = sh * r0 + r - ph, w = sw * j + u - pw;
    if (h >= 0 && h < H && w >= 0 && w < W) v = x[((long long)(n * H + h) * W + w) * C + c];
}
z = v;
