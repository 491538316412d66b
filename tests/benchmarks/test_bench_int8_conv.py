"""pytest-benchmark cases of the int8 convolution (int8_conv.py): a ResNet
3x3 layer (64 -> 64 channels at 56x56, batch 1), NCX with u8 output as
oneDNN's int8 cases have it, as one QuantizedConvolution and as Dequantize +
the f32 convolution. int8_conv.py prints every layer side by side."""

import pytest

import dyngraph as dg
from int8_conv import LAYERS, steps


@pytest.fixture(scope="module")
def resnet_3x3():
    return steps(LAYERS[0], "NCX", dg.u8)


@pytest.mark.parametrize("way", ["int8", "dequantize+f32"])
def test_int8_conv_resnet_3x3(benchmark, resnet_3x3, way):
    benchmark.group = "int8-conv-3x3-64-56x56"
    benchmark(resnet_3x3[way])
