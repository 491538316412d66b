"""oneDNN Graph's op kinds, their attributes (types and defaults, from
oneDNN's operation pages) and how they map to dyngraph's.

A oneDNN kind maps to the dyngraph kind of the same name when dyngraph has
a shape rule for it. Its attributes map by
name: an attribute dyngraph's rule has is passed (translated where the two
spell a value differently, e.g. GELU's ``gelu_erf`` / ``erf``), with
oneDNN's default when the file leaves it out (dyngraph's defaults differ:
SoftMax's axis is 1 in oneDNN); one dyngraph lacks is accepted only at a
value that means what dyngraph computes anyway (MatMul
``accumulation_mode=strict``: dyngraph accumulates in f32), and anything else
is refused by name. Because the lookup goes through dyngraph's op registry,
an op kind or attribute added to dyngraph is picked up here without a change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

REQUIRED = object()

# oneDNN attribute value types as a graph file spells them
ATTR_TYPES = ("bool", "s64", "s64[]", "f32", "f32[]", "string")


@dataclass(frozen=True)
class AttrInfo:
    type: str
    default: Any = REQUIRED
    # values dyngraph computes as asked even though its rule has no such attribute
    accepted: Tuple[Any, ...] = ()
    # oneDNN value -> dyngraph value, where the spellings differ
    values: Mapping[Any, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class KindInfo:
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...] = ("dst",)
    attrs: Mapping[str, AttrInfo] = field(default_factory=dict)
    dyngraph: Optional[str] = None  # dyngraph's name of the kind, when it differs
    what: str = ""  # what the op is, for refusal messages (training, quantization, ...)


def _a(type_: str, default=REQUIRED, **kw) -> AttrInfo:
    return AttrInfo(type_, default, **kw)


_BROADCAST = {"auto_broadcast": _a("string", "numpy")}
_FORMAT = {"data_format": _a("string", "NXC")}
_REDUCE = {"axes": _a("s64[]", []), "keep_dims": _a("bool", False)}
# oneDNN's documentation spells auto_pad in lower case; its own graph files and
# batch files write None / SAME_UPPER / SAME_LOWER / VALID, which it accepts too
_AUTO_PAD = _a("string", "none", values={v.upper() if v != "none" else "None": v
                                         for v in ("none", "same_upper", "same_lower", "valid")})
_CONV = {
    "strides": _a("s64[]"), "pads_begin": _a("s64[]"), "pads_end": _a("s64[]"), "dilations": _a("s64[]"),
    "auto_pad": _AUTO_PAD, "groups": _a("s64", 1), "data_format": _a("string", "NXC"),
    "weights_format": _a("string", "XIO"),
}
_CONVT = dict(_CONV, output_padding=_a("s64[]", []))
_POOL = {
    "strides": _a("s64[]"), "pads_begin": _a("s64[]"), "pads_end": _a("s64[]"), "kernel": _a("s64[]"),
    "auto_pad": _AUTO_PAD, "data_format": _a("string", "NXC"),
}
_QUANT = {"qtype": _a("string", "per_tensor"), "axis": _a("s64", 1), "scales": _a("f32[]"), "zps": _a("s64[]", [])}
_DYNQ = {"qtype": _a("string", "per_tensor"), "axis": _a("s64", 1), "group_shape": _a("s64[]", [])}
_INTERP = {
    "mode": _a("string"), "coordinate_transformation_mode": _a("string", "half_pixel"), "sizes": _a("s64[]", []),
    "scales": _a("f32[]", []), "data_format": _a("string", "NXC"),
}
_USE_DST = {"use_dst": _a("bool", True)}
_UNARY = KindInfo(("src",))
_BINARY = KindInfo(("src_0", "src_1"), attrs=_BROADCAST)
_TRAINING = "training"

ONEDNN_KINDS: Dict[str, KindInfo] = {
    # elementwise
    "Abs": _UNARY, "Exp": _UNARY, "Log": _UNARY, "ReLU": _UNARY, "Sigmoid": _UNARY, "Sqrt": _UNARY,
    "Square": _UNARY, "Tanh": _UNARY, "HardSwish": _UNARY, "Mish": _UNARY, "Reciprocal": _UNARY, "Round": _UNARY,
    "Clamp": KindInfo(("src",), attrs={"min": _a("f32"), "max": _a("f32")}),
    "Elu": KindInfo(("src",), attrs={"alpha": _a("f32")}),
    "GELU": KindInfo(("src",), attrs={"mode": _a("string", "gelu_erf", values={"gelu_erf": "erf", "gelu_tanh": "tanh"})}),
    "HardSigmoid": KindInfo(("src",), attrs={"alpha": _a("f32"), "beta": _a("f32")}),
    "LeakyReLU": KindInfo(("src",), attrs={"alpha": _a("f32")}),
    "Pow": KindInfo(("src",), attrs={"beta": _a("f32")}),
    "SoftPlus": KindInfo(("src",), attrs={"beta": _a("f32", 1.0)}),
    "PReLU": KindInfo(("src", "slope"), attrs={"data_format": _a("string", "NXC"),
                                                "per_channel_broadcast": _a("bool", True)}),
    "Add": _BINARY, "Subtract": _BINARY, "Multiply": _BINARY, "Divide": _BINARY, "Maximum": _BINARY,
    "Minimum": _BINARY, "SquaredDifference": _BINARY,
    "GreaterEqual": _BINARY,
    "Select": KindInfo(("cond", "src_0", "src_1"), attrs=_BROADCAST),
    "BiasAdd": KindInfo(("src", "bias"), attrs=_FORMAT),
    # matrix products, normalization, softmax
    "MatMul": KindInfo(("src", "weights", "bias"), attrs={
        "transpose_a": _a("bool", False), "transpose_b": _a("bool", False),
        # dyngraph accumulates floating-point products in f32: what these modes allow
        "accumulation_mode": _a("string", "strict", accepted=("strict", "relaxed", "any", "f32")),
    }),
    "SoftMax": KindInfo(("src",), ("dst", "stats"), attrs={
        "axis": _a("s64", 1), "mode": _a("string", "none", accepted=("none",))}),
    "LogSoftmax": KindInfo(("src",), attrs={"axis": _a("s64", -1)}),
    "LayerNorm": KindInfo(("src", "gamma", "beta"), ("dst", "mean", "variance"), attrs={
        "keep_stats": _a("bool", True), "begin_norm_axis": _a("s64", -1), "use_affine": _a("bool", True),
        "epsilon": _a("f32", 1e-5)}),
    "RMSNorm": KindInfo(("src", "gamma"), attrs={"epsilon": _a("f32", 1e-5), "begin_norm_axis": _a("s64", -1)}),
    "GroupNorm": KindInfo(("src", "gamma", "beta"), ("dst", "mean", "variance"), attrs={
        "groups": _a("s64"), "keep_stats": _a("bool", True), "use_affine": _a("bool", True),
        "epsilon": _a("f32", 1e-5), "data_format": _a("string", "NXC")}),
    "BatchNormInference": KindInfo(("src", "gamma", "beta", "mean", "variance"),
                                   attrs={"epsilon": _a("f32"), "data_format": _a("string", "NXC")}),
    # reductions
    "ReduceL1": KindInfo(("src", "axes"), attrs=_REDUCE), "ReduceL2": KindInfo(("src", "axes"), attrs=_REDUCE),
    "ReduceMax": KindInfo(("src", "axes"), attrs=_REDUCE), "ReduceMean": KindInfo(("src", "axes"), attrs=_REDUCE),
    "ReduceMin": KindInfo(("src", "axes"), attrs=_REDUCE), "ReduceProd": KindInfo(("src", "axes"), attrs=_REDUCE),
    "ReduceSum": KindInfo(("src", "axes"), attrs=_REDUCE),
    # data movement
    "StaticReshape": KindInfo(("src",), attrs={"shape": _a("s64[]"), "special_zero": _a("bool")}),
    "StaticTranspose": KindInfo(("src",), attrs={"order": _a("s64[]")}),
    "Concat": KindInfo(("src_i",), attrs={"axis": _a("s64")}),
    "TypeCast": _UNARY,
    "Reorder": KindInfo(("src",)),
    "GenIndex": KindInfo(("src",), attrs={"axis": _a("s64")}),
    "Interpolate": KindInfo(("src", "sizes"), attrs=_INTERP),
    "Dropout": KindInfo(("src", "seed", "offset", "probability"), ("dst", "mask"), what="dropout"),
    "End": KindInfo(("src",), ()),
    "Wildcard": KindInfo(()),
    # convolution and pooling
    "Convolution": KindInfo(("src", "weights", "bias"), attrs=_CONV),
    "ConvTranspose": KindInfo(("src", "weights", "bias"), attrs=_CONVT),
    "AvgPool": KindInfo(("src",), attrs=dict(_POOL, exclude_pad=_a("bool"), rounding_type=_a("string", "floor"))),
    "MaxPool": KindInfo(("src",), attrs=dict(_POOL, rounding_type=_a("string", "floor"), dilations=_a("s64[]", []))),
    # quantization
    "Quantize": KindInfo(("src",), attrs=_QUANT, what="quantization"),
    "Dequantize": KindInfo(("src",), attrs=_QUANT, what="quantization"),
    "DynamicQuantize": KindInfo(("src", "scales", "zps"), attrs=_DYNQ, what="quantization"),
    "DynamicDequantize": KindInfo(("src", "scales", "zps"), attrs=_DYNQ, what="quantization"),
    # training
    "AbsBackward": KindInfo(("src", "diff_dst"), what=_TRAINING),
    "AvgPoolBackward": KindInfo(("diff_dst", "src_shape"), attrs=dict(_POOL, exclude_pad=_a("bool"),
                                                                        src_shape=_a("s64[]", [])), what=_TRAINING),
    "BatchNormForwardTraining": KindInfo(("src", "mean", "variance", "gamma", "beta"),
                                         ("dst", "running_mean", "running_variance", "batch_mean", "batch_variance"),
                                         # momentum 0.5 where not given, as oneDNN's graph backend takes it
                                         attrs={"epsilon": _a("f32"), "momentum": _a("f32", 0.5),
                                                "data_format": _a("string", "NXC")},
                                         what="made of several ops by the importer: decompose=True"),
    "BatchNormTrainingBackward": KindInfo(("src", "diff_dst", "mean", "variance", "gamma"),
                                          ("diff_src", "diff_gamma", "diff_beta"),
                                          attrs={"epsilon": _a("f32"), "data_format": _a("string", "NXC")},
                                          what=_TRAINING),
    "BiasAddBackward": KindInfo(("diff_dst",), ("diff_bias",), attrs=_FORMAT, what=_TRAINING),
    "BiasAddBackprop": KindInfo(("diff_dst",), ("diff_bias",), attrs=_FORMAT, what=_TRAINING),
    "ClampBackward": KindInfo(("src", "diff_dst"), ("diff_src",), attrs={"min": _a("f32"), "max": _a("f32"),
                                                                          **_USE_DST}, what=_TRAINING),
    "ConvolutionBackwardData": KindInfo(("diff_dst", "weights", "dst_shape"), ("diff_src",),
                                        attrs=dict(_CONVT, dst_shape=_a("s64[]", [])), what=_TRAINING),
    "ConvolutionBackwardWeights": KindInfo(("src", "diff_dst", "weights_shape"), ("diff_weights",),
                                           attrs=dict(_CONV, weights_shape=_a("s64[]", [])), what=_TRAINING),
    "ConvTransposeBackwardData": KindInfo(("diff_dst", "weights"), ("diff_src",), attrs=_CONVT, what=_TRAINING),
    "ConvTransposeBackwardWeights": KindInfo(("src", "diff_dst", "weights_shape"), ("diff_weights",),
                                             attrs=dict(_CONVT, weights_shape=_a("s64[]", [])), what=_TRAINING),
    "EluBackward": KindInfo(("src", "diff_dst"), ("diff_src",), attrs={"alpha": _a("f32"), **_USE_DST},
                            what=_TRAINING),
    "GELUBackward": KindInfo(("src", "diff_dst"), ("diff_src",), attrs={"mode": _a("string", "gelu_erf")},
                             what=_TRAINING),
    "HardSigmoidBackward": KindInfo(("src", "diff_dst"), ("diff_src",), attrs={"alpha": _a("f32"),
                                                                                "beta": _a("f32")}, what=_TRAINING),
    "HardSwishBackward": KindInfo(("src", "diff_dst"), ("diff_src",), what=_TRAINING),
    "InterpolateBackward": KindInfo(("src", "diff_dst", "sizes"), ("diff_src",), attrs=_INTERP, what=_TRAINING),
    "LayerNormBackward": KindInfo(("src", "diff_dst", "mean", "variance", "gamma", "beta"),
                                  ("diff_src", "diff_gamma", "diff_beta"),
                                  attrs={"begin_norm_axis": _a("s64", -1), "use_affine": _a("bool", True),
                                         "epsilon": _a("f32", 1e-5)}, what=_TRAINING),
    "LogSoftmaxBackward": KindInfo(("diff_dst", "dst"), ("diff_src",), attrs={"axis": _a("s64", -1)},
                                   what=_TRAINING),
    "MaxPoolBackward": KindInfo(("src", "diff_dst"), ("diff_src",), attrs=dict(_POOL, dilations=_a("s64[]", [])),
                                what=_TRAINING),
    "MishBackward": KindInfo(("src", "diff_dst"), ("diff_src",), what=_TRAINING),
    "PReLUBackward": KindInfo(("src", "slope", "diff_dst"), ("diff_src", "diff_slope"), attrs=_FORMAT,
                              what=_TRAINING),
    "ReLUBackward": KindInfo(("src", "diff_dst"), ("diff_src",), attrs=_USE_DST, what=_TRAINING),
    "SigmoidBackward": KindInfo(("src", "diff_dst"), ("diff_src",), attrs=_USE_DST, what=_TRAINING),
    "SoftMaxBackward": KindInfo(("diff_dst", "dst"), ("diff_src",), attrs={"axis": _a("s64", 1)}, what=_TRAINING),
    "SoftPlusBackward": KindInfo(("src", "diff_dst"), ("diff_src",), attrs={"beta": _a("f32", 1.0)},
                                 what=_TRAINING),
    "SqrtBackward": KindInfo(("src", "diff_dst"), ("diff_src",), attrs=_USE_DST, what=_TRAINING),
    "TanhBackward": KindInfo(("src", "diff_dst"), ("diff_src",), attrs=_USE_DST, what=_TRAINING),
}

# dyngraph kind name -> oneDNN's, where they differ (for writing files)
TO_ONEDNN_KIND = {info.dyngraph: name for name, info in ONEDNN_KINDS.items() if info.dyngraph}


def kind_info(kind: str) -> Optional[KindInfo]:
    return ONEDNN_KINDS.get(kind)


def is_training(kind: str) -> bool:
    info = ONEDNN_KINDS.get(kind)
    return bool(info and info.what == _TRAINING) or kind.endswith(("Backward", "Backprop"))


def to_onednn_value(kind: str, attr: str, value):
    """dyngraph's spelling of an attribute value -> oneDNN's (GELU mode erf -> gelu_erf)."""
    info = ONEDNN_KINDS.get(TO_ONEDNN_KIND.get(kind, kind))
    a = info.attrs.get(attr) if info else None
    if a is not None and isinstance(value, str):
        for k, v in a.values.items():
            if v == value:
                return k
    return value
