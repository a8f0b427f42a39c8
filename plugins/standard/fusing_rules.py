"""The standard collection's fusing rules (registered by ``plugins.standard.register``).

Each applies only where the fused layer computes exactly what the chain computes:

* conv_bn applies the activation after the normalization, so the convolution must have none;
* conv_pool applies the activation between the convolution and the pooling, so the pooling must
  have none, except ReLU after max pooling, which gives the same result in either order;
* conv_sum and conv_bn_sum apply their activation after the sum, as the sum does, so the convolution must have
  none; the sum's other input (a ResNet block's shortcut) becomes the fused layer's input 1 (``residual``). The
  convolution may be either input of the sum (a sum's inputs commute: ``x + conv(x)`` fuses as ``conv(x) + x``
  does); a sum of more than two inputs is not fused;
* upscale_concat (a U-Net decoder step in one pass over memory) applies its activation to every
  channel, as the concatenation does, so the upsample must have none. The concatenation's input 1 (the
  skip tensor) becomes the fused layer's input 1; a concatenation of more inputs is not fused, and one
  whose input 0 is not the upsample never matches (the channel order would change), nor one along another axis
  than the channels.
* conv_depthwise (an inverted residual block's expansion and depthwise layer) holds the expansion's activation as
  its parameter conv_activation and the depthwise layer's as its own; fp32 NHWC only, where the CPU runs the pair as
  one kernel (elsewhere the two convolutions run one after the other: nothing to gain). The depthwise layer's input
  channel count is not in its parameters: a grouped convolution that is no depthwise one is fused too and runs as two
  convolutions.
"""
from __future__ import annotations

RULES: list[str] = [
    "*|*|conv_bn = batch_normalization {convolution[act == 'none']}",
    "*|*|conv_pool = pooling[act == 'none' || pool_type == 'max' && act == 'relu'] {convolution}",
    "*|*|upscale_concat = concatenation[axis == 1] {upsample[act == 'none']}",
    "*|*|conv_sum = element_wise[operation == 'sum'] {convolution[act == 'none']}",
    "*|*|conv_bn_sum = element_wise[operation == 'sum'] {conv_bn[act == 'none']}",
    "fp32|nhwc|conv_depthwise = convolution[groups > 1 && groups == num_output_channels] "
    "{convolution[kernel_size == 1 && stride == 1 && padding == 0 && groups == 1]}",
]
