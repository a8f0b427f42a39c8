// One pass of y = act(x * scale[c] + shift[c]) (a batch normalization or affine layer with its statistics folded
// into float32 scale and shift): the body of an ElementwiseKernel over physical x, c the element's channel (NHWC:
// the fastest axis; NCHW: the axis of H*W runs). ACT and the coefficients as in epilogue.cuh.
const long long c = nhwc ? i % C : (i / HW) % C;
y = (T)layerlab_act(act, (float)x * scale[c] + shift[c], alpha, beta);
