extern "C" __global__ void NAME(...)
