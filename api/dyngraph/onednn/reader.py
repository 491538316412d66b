"""A oneDNN Graph JSON file -> a dyngraph :class:`~dyngraph.Graph`.

What dyngraph lacks (an op kind, a data type, an attribute value, an op
output) is collected over the whole file and refused at once with an
:class:`~dyngraph.UnsupportedError` whose ``features`` name every gap. A
file that is malformed is a :class:`~dyngraph.GraphError`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..errors import DTypeError, DyngraphError, GraphError, ShapeError, UnsupportedError
from ..graph import Graph
from ..logical_tensor import CONSTANT, STATE, VARIABLE, LogicalTensor
from ..op import Op, OpKind
from ..op_pipeline import Ids
from ..ops import schema_of
from ..ops.interpolate import small_ratio
from ..symbolic import DYNAMIC_DIM, UNKNOWN_DIM, Dim, Expr
from . import compose
from . import source
from . import dtypes as odt
from .document import LT, Document, OpRec, read_document
from .exprs import parse_expr
from .opmap import REQUIRED, KindInfo, kind_info
from .options import (Overrides, parse_dt, parse_dynamic, parse_in_shapes, parse_op_attrs, parse_op_kind,
                      parse_tensor_property)
from .rewrite import apply as apply_overrides

_SPATIAL_KINDS = {OpKind.Convolution, OpKind.ConvTranspose, OpKind.MaxPool, OpKind.AvgPool, OpKind.AdaptiveAvgPool,
                  OpKind.Interpolate}
# those of them that take 3 spatial axes (rank 5)
_SPATIAL_3D_KINDS = {OpKind.Convolution, OpKind.MaxPool, OpKind.AvgPool, OpKind.Interpolate}

# kinds oneDNN lets take or give several float types (bf16/f16 with f32: its operations
# pages' data type tables): computed in f32 between exact casts, as oneDNN accumulates
_MIXED_FLOAT = {OpKind.MatMul, OpKind.SoftMax, OpKind.LayerNorm, OpKind.RMSNorm, OpKind.GroupNorm, OpKind.Add,
                OpKind.Subtract, OpKind.Multiply, OpKind.Divide, OpKind.Maximum, OpKind.Minimum}

# oneDNN kinds dyngraph has no one op for, expressed exactly with several (with
# decompose=True): the dyngraph kind whose attributes they take
_COMPOSED = {"ReduceL1": OpKind.ReduceSum, "ReduceL2": OpKind.ReduceSum, "LogSoftmax": OpKind.SoftMax}

_PROPERTY = {"undef": VARIABLE, "variable": VARIABLE, "host_scalar": VARIABLE, "constant": CONSTANT,
             "state": STATE}


@dataclass
class Imported:
    """A graph read from a file, with what the file says around it."""

    graph: Graph
    doc: Document
    inputs: List[int]  # graph inputs, in the file's input_ports order first
    outputs: List[int]
    onednn_kinds: Dict[int, str] = field(default_factory=dict)  # dyngraph op id -> the file's op kind
    decomposed: List[str] = field(default_factory=list)  # oneDNN features expressed with several dyngraph ops

    @property
    def symbols(self) -> Dict[str, Dim]:
        return self.doc.symbols


def make_overrides(in_shapes=None, op_attrs=None, dt=None, op_kind=None, mb=0, tensor_property=None,
                   dynamic=None) -> Overrides:
    """Overrides from Python arguments: benchdnn's option strings, or dicts."""
    try:
        return _make_overrides(in_shapes, op_attrs, dt, op_kind, mb, tensor_property, dynamic)
    except (TypeError, ValueError, AttributeError, IndexError) as e:
        if isinstance(e, DyngraphError):
            raise
        raise GraphError(f"rewrite options: {e}") from None


def _make_overrides(in_shapes, op_attrs, dt, op_kind, mb, tensor_property, dynamic) -> Overrides:
    ov = Overrides()
    if in_shapes:
        ov.in_shapes = parse_in_shapes(in_shapes) if isinstance(in_shapes, str) else {
            int(k): (None if v is None else [int(d) for d in v]) for k, v in in_shapes.items()}
    if op_attrs:
        ov.op_attrs = parse_op_attrs(op_attrs) if isinstance(op_attrs, str) else {
            int(k): {n: _attr_text(x) for n, x in v.items()} for k, v in op_attrs.items()}
    if dt:
        ov.dt = parse_dt(dt) if isinstance(dt, str) else {int(k): str(v) for k, v in dt.items()}
    if op_kind:
        ov.op_kind = parse_op_kind(op_kind) if isinstance(op_kind, str) else {int(k): str(v) for k, v in op_kind.items()}
    if mb:
        if isinstance(mb, bool) or not isinstance(mb, int) or mb < 0:
            raise GraphError(f"mb must be a non-negative int, got {mb!r}")
        ov.mb = mb
    if tensor_property:
        ov.tensor_property = (parse_tensor_property(tensor_property) if isinstance(tensor_property, str)
                              else dict(tensor_property))
    if dynamic:
        if isinstance(dynamic, dict):
            dynamic = [(k[0], k[1], v) for k, v in dynamic.items()]
        ov.dynamic = parse_dynamic(dynamic)
    return ov


def _attr_text(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return "x".join(str(x) for x in v)
    return str(v)


class _Mapper:
    def __init__(self, doc: Document, infer_internal: bool, decompose: bool, wildcards: bool = False):
        self.doc = doc
        self.wildcards = wildcards
        self.op_blockers: List[str] = []
        self.infer = infer_internal
        self.decompose = decompose
        self.produced = set(doc.produced())
        self.producer_lt = {lt.id: lt for op in doc.ops for lt in op.outputs}  # the producer's declaration
        self.declared: Dict[int, Any] = {}  # tensor id -> the shape it was first declared with
        self.blockers: List[str] = []
        self.ids = Ids(doc.max_tensor_id() + 1, doc.max_op_id() + 1)  # for the ops and tensors a mapping adds
        self.kinds: Dict[int, str] = {}
        self.decomposed: List[str] = []

    def block(self, feature: str) -> None:
        self.op_blockers.append(feature)
        if feature not in self.blockers:
            self.blockers.append(feature)

    # -- tensors -------------------------------------------------------------------
    def lt(self, rec: LT, where: str) -> LogicalTensor:
        dt = odt.to_dyngraph(rec.dtype)
        if dt is None:
            if rec.dtype not in odt.ONEDNN_DTYPES:
                raise GraphError(f"{where}: tensor {rec.id}: unknown data type {rec.dtype!r}")
            self.block(f"dtype {rec.dtype}")
            dt = odt.to_dyngraph("f32")
        prop = _PROPERTY.get(rec.property)
        if prop is None:
            raise GraphError(f"{where}: tensor {rec.id}: unknown property_type {rec.property!r}")
        if rec.id in self.produced and prop is CONSTANT:
            prop = VARIABLE  # oneDNN's hint that an op's result never changes: dyngraph computes it like any other
        if rec.id in self.produced:
            # oneDNN connects a consumer's input to its producer's output by id: the
            # producer's declaration is the tensor's, whatever a consumer writes
            shape = self.shape(self.producer_lt[rec.id], where)
        else:
            shape = self.shape(rec, where)
            seen = self.declared.setdefault(rec.id, shape)
            if shape is not None and seen is not None and len(seen) == len(shape) and any(
                    isinstance(a, int) and isinstance(b, int) and a != b and a > 0 and b > 0
                    for a, b in zip(seen, shape)):
                self.block("a graph input declared with two different shapes (the file contradicts itself)")
                shape = seen
        return LogicalTensor(rec.id, dt, shape, prop, rec.name)

    def shape(self, rec: LT, where: str):
        if rec.shape is None or (self.infer and rec.id in self.produced):
            return None
        internal = rec.id in self.produced
        dims = []
        for d in rec.shape:
            if isinstance(d, Expr):  # marked dynamic by a rewrite
                dims.append(d)
            elif isinstance(d, str):
                dims.append(DYNAMIC_DIM if d == "?" else parse_expr(d, self.doc.symbols, f"{where}: tensor {rec.id}"))
            elif d < 0:
                if internal and not rec.symbolic:
                    return None  # oneDNN writes an unknown shape as [-1] or [INT64_MIN]: inferred
                dims.append(UNKNOWN_DIM)
            else:
                if d == 0:
                    self.block("zero-size dimension")
                    d = 1
                dims.append(d)
        return dims

    def new_lt(self, dtype, shape=None) -> LogicalTensor:
        return LogicalTensor(self.ids.tensor(), dtype, shape)

    def new_op(self, kind: OpKind, ins, outs, attrs, name: str) -> Op:
        return Op(self.ids.op(), kind, ins, outs, attrs, name)

    # -- ops -----------------------------------------------------------------------
    def op(self, rec: OpRec) -> List[Op]:
        if rec.kind == "End":
            return []
        self.op_blockers = []
        ops = self._op(rec)
        if self.wildcards and self.op_blockers:  # kept in the graph as an op dyngraph does not run
            self.kinds[rec.id] = rec.kind
            return [wildcard(rec.id, [self.lt(t, rec.where) for t in rec.inputs],
                             [self.lt(t, rec.where) for t in rec.outputs], rec.name)]
        return ops

    def _op(self, rec: OpRec) -> List[Op]:
        info = kind_info(rec.kind)
        kind = OpKind.__members__.get(info.dyngraph if info and info.dyngraph else rec.kind)
        if kind is None and rec.kind == "Reorder" and schema_of(OpKind.TypeCast) is not None:
            kind = OpKind.TypeCast  # a layout change: dyngraph's tensors have one layout, the values are copied
        ins = [self.lt(t, rec.where) for t in rec.inputs]
        outs = [self.lt(t, rec.where) for t in rec.outputs]
        if kind is OpKind.Wildcard:
            return [Op(rec.id, kind, ins, outs, {}, rec.name)]
        if kind is None and self.decompose and rec.kind in _COMPOSED:
            return self._composed(rec, info, ins, outs)
        if kind is None and self.decompose and rec.kind == "PReLU":
            return self._prelu(rec, info, ins, outs)
        if kind is None and self.decompose and rec.kind == "BatchNormForwardTraining":
            return self._bn_training(rec, info, ins, outs)
        schema = schema_of(kind) if kind is not None else None
        if schema is None:
            what = f" ({info.what})" if info and info.what else ""
            self.block(f"op kind {rec.kind}{what}")
            return []
        stats = rec.kind == "SoftMax" and len(outs) == 2 and self.decompose  # logsumexp, from several ops
        ln_stats = (rec.kind == "LayerNorm" and len(outs) == 3 and self.decompose  # mean, variance: several ops
                    and ins[0].shape is not None and len(ins[0].shape) >= 1)
        if not self._arity(rec, info, schema, len(outs) - stats - 2 * ln_stats):
            return []
        attrs, inf_as_zero = self.attrs(rec, info, schema)
        self._limits(rec, kind, ins, attrs)
        self.kinds[rec.id] = rec.kind

        def core(i, o):
            if ln_stats:
                return compose.layer_norm_stats(self, rec, i, o, attrs)
            if (kind is OpKind.MatMul and self.decompose and all(x.shape is not None for x in i[:2])
                    and any(len(x.shape) == 1 for x in i[:2])):
                return compose.matmul_1d(self, rec, i, o, attrs)
            return self._core(rec, kind, i, o, attrs, inf_as_zero, stats)

        floats = {lt.dtype for lt in ins + outs if lt.dtype.is_float}
        if kind in _MIXED_FLOAT and len(floats) > 1 and self.decompose:
            self.decomposed.append(f"{rec.kind} of mixed float types, computed in f32")
            return self._in_f32(rec, ins, outs, core)
        return core(ins, outs)

    def _composed_attrs(self, rec: OpRec, info: KindInfo):
        """The attribute values of an op the importer makes of several (an attribute the kind does not
        have blocks it), and its data_format, checked."""
        values = {name: self._value(a, rec.where) for name, a in rec.attrs.items()}
        for name, value in values.items():
            if name not in info.attrs:
                self.block(f"{rec.kind} attribute {name}={_attr_text(value)}")
        fmt = values.get("data_format", info.attrs["data_format"].default)
        if fmt not in ("NCX", "NXC"):
            raise GraphError(f"{rec.where}: attribute 'data_format' must be NCX or NXC, got {fmt!r}")
        return values, fmt

    def _prelu(self, rec: OpRec, info: Optional[KindInfo], ins, outs) -> List[Op]:
        if len(ins) != 2 or len(outs) != 1:
            raise GraphError(f"{rec.where}: PReLU takes src and slope and gives dst, got {len(ins)} inputs "
                             f"and {len(outs)} outputs")
        known = info.attrs
        values, fmt = self._composed_attrs(rec, info)
        self.kinds[rec.id] = rec.kind
        return compose.prelu(self, rec, ins, outs, fmt, bool(values.get("per_channel_broadcast",
                                                                         known["per_channel_broadcast"].default)))

    def _bn_training(self, rec: OpRec, info: KindInfo, ins, outs) -> List[Op]:
        if len(ins) not in (3, 5) or len(outs) != 5:
            raise GraphError(f"{rec.where}: BatchNormForwardTraining takes src, mean, variance (and gamma, beta) and "
                             f"gives dst, running_mean, running_variance, batch_mean, batch_variance; got "
                             f"{len(ins)} inputs and {len(outs)} outputs")
        known = info.attrs
        values, fmt = self._composed_attrs(rec, info)
        if "epsilon" not in values:
            raise GraphError(f"{rec.where}: BatchNormForwardTraining needs the attribute 'epsilon'")
        if len(ins) == 3:
            self.block("BatchNormForwardTraining without gamma and beta")
        if ins[0].shape is None or len(ins[0].shape) < 2:
            self.block("BatchNormForwardTraining of a src of unknown rank or rank below 2")
        if self.op_blockers:
            return []
        self.kinds[rec.id] = rec.kind
        eps, momentum = float(values["epsilon"]), float(values.get("momentum", known["momentum"].default))

        def core(i, o):
            return compose.batch_norm_training(self, rec, i, o, eps, momentum, fmt)

        if len({lt.dtype for lt in ins + outs if lt.dtype.is_float}) > 1:
            return self._in_f32(rec, ins, outs, core)
        return core(ins, outs)

    def _core(self, rec: OpRec, kind: OpKind, ins, outs, attrs, inf_as_zero: bool, stats: bool) -> List[Op]:
        axis = attrs.get("axis", 1)
        if (inf_as_zero or stats) and (not isinstance(axis, int) or isinstance(axis, bool)):
            # (the decompositions below index with it before the op's own attribute check runs)
            raise GraphError(f"{rec.where}: attribute 'axis' must be an integer, got {axis!r}")
        ops = (self._softmax_inf_as_zero(rec, ins, outs[:1], attrs) if inf_as_zero
               else [Op(rec.id, kind, ins, outs[:1] if stats else outs, attrs, rec.name)])
        if stats:
            ops += self._softmax_stats(rec, ins[0], outs[1], axis, inf_as_zero)
        return ops

    def _composed(self, rec: OpRec, info: Optional[KindInfo], ins, outs) -> List[Op]:
        """ReduceL1 = sum |x|, ReduceL2 = sqrt(sum x^2), LogSoftmax = x - logsumexp(x)."""
        schema = schema_of(_COMPOSED[rec.kind])
        if not self._arity(rec, info, schema, len(outs)):
            return []
        attrs, _ = self.attrs(rec, info, schema)
        self.kinds[rec.id] = rec.kind
        self.decomposed.append(f"{rec.kind} from several ops")

        def core(i, o):
            x, y, base = i[0], o[0], rec.name
            if rec.kind == "LogSoftmax":
                lse = self.new_lt(x.dtype)
                return (self._logsumexp(rec.id, x, lse, attrs.get("axis", -1), base)
                        + [self.new_op(OpKind.Subtract, [x, lse], [y], {}, f"{base}.minus_lse")])
            if rec.kind == "ReduceL1":
                a = self.new_lt(x.dtype)
                return [Op(rec.id, OpKind.Abs, [x], [a], {}, f"{base}.abs"),
                        self.new_op(OpKind.ReduceSum, [a], [y], attrs, base)]
            sq, total = self.new_lt(x.dtype), self.new_lt(x.dtype)
            return [Op(rec.id, OpKind.Square, [x], [sq], {}, f"{base}.square"),
                    self.new_op(OpKind.ReduceSum, [sq], [total], attrs, f"{base}.sum"),
                    self.new_op(OpKind.Sqrt, [total], [y], {}, base)]

        if len({lt.dtype for lt in ins + outs if lt.dtype.is_float}) > 1:
            return self._in_f32(rec, ins, outs, core)
        return core(ins, outs)

    def _logsumexp(self, first_id: Optional[int], x, out, axis: int, base: str) -> List[Op]:
        """out = max + log(sum(exp(x - max))) over the axis, kept as a dimension of 1
        (the first op takes the id ``first_id`` when one is given)."""
        dt = x.dtype
        keep = {"axes": [axis], "keep_dims": True}
        row_max, centered, e, total, log_total = (self.new_lt(dt) for _ in range(5))
        first = (Op(first_id, OpKind.ReduceMax, [x], [row_max], keep, f"{base}.max") if first_id is not None
                 else self.new_op(OpKind.ReduceMax, [x], [row_max], keep, f"{base}.max"))
        return [
            first,
            self.new_op(OpKind.Subtract, [x, row_max], [centered], {}, f"{base}.centered"),
            self.new_op(OpKind.Exp, [centered], [e], {}, f"{base}.exp"),
            self.new_op(OpKind.ReduceSum, [e], [total], keep, f"{base}.sum"),
            self.new_op(OpKind.Log, [total], [log_total], {}, f"{base}.log"),
            self.new_op(OpKind.Add, [row_max, log_total], [out], {}, f"{base}.lse"),
        ]

    def _in_f32(self, rec: OpRec, ins, outs, core) -> List[Op]:
        """The op between casts: its bf16/f16 inputs widened to f32 (exact),
        computed in f32, its bf16/f16 outputs rounded from f32."""
        from ..dtypes import DataType

        f32 = DataType.f32
        before, after, wide_ins, wide_outs = [], [], [], []
        for i, x in enumerate(ins):
            if x.dtype.is_float and x.dtype is not f32:
                w = self.new_lt(f32, x.shape)
                before.append(self.new_op(OpKind.TypeCast, [x], [w], {}, f"{rec.name}.in{i}_f32"))
                x = w
            wide_ins.append(x)
        for k, y in enumerate(outs):
            if y.dtype.is_float and y.dtype is not f32:
                w = self.new_lt(f32, y.shape)
                after.append(self.new_op(OpKind.TypeCast, [w], [y], {}, f"{rec.name}.out{k}_{y.dtype.name}"))
                y = w
            wide_outs.append(y)
        return before + core(wide_ins, wide_outs) + after

    def _limits(self, rec: OpRec, kind: OpKind, ins, attrs) -> None:
        """oneDNN configurations of op kinds dyngraph has, which its rules do
        not take: refused by name (or respelled) rather than failing as errors."""
        rank = len(ins[0].shape) if ins and ins[0].shape is not None else None
        if kind in _SPATIAL_KINDS and rank is not None and rank > (5 if kind in _SPATIAL_3D_KINDS else 4):
            self.block(f"{rec.kind} with {rank - 2} spatial axes")
        if kind is OpKind.Interpolate:
            if attrs.get("mode") == "trilinear":
                attrs["mode"] = "linear"  # oneDNN's linear is n-linear; dyngraph's linear takes 1 or 3 axes
            if attrs.get("mode") == "linear" and rank == 4:
                attrs["mode"] = "bilinear"  # oneDNN's linear is n-linear
            fmt = attrs.get("data_format", "NXC")
            sizes = ins[0].shape[2:] if fmt == "NCX" else ins[0].shape[1:-1] if rank else ()
            for sc, d in zip(attrs.get("scales") or (), sizes):
                if (sc > 0 and math.isfinite(sc) and small_ratio(sc) is None
                        and not (isinstance(d, int) and d > 0)):  # the rule's own test (ops/interpolate.py)
                    self.block(f"Interpolate scale {sc:g} (not a ratio of small integers) of a dynamic size")
        if kind in (OpKind.Dequantize, OpKind.Quantize) and attrs.get("qtype") == "per_channel" and rank:
            axis, shape = attrs.get("axis", 1), ins[0].shape
            n = len(attrs.get("scales") or ())
            if (isinstance(axis, int) and not isinstance(axis, bool) and -rank <= axis < rank
                    and isinstance(shape[axis], int)) and shape[axis] > 0 and n != shape[axis]:
                if not (kind is OpKind.Dequantize and self._grouped_weight_scales(rec, attrs, shape, axis % rank)):
                    self.block(f"{rec.kind} with {n} per-channel scales over an axis of {shape[axis]}")

    def _grouped_weight_scales(self, rec: OpRec, attrs, shape, axis: int) -> bool:
        """The weights of a grouped ConvTranspose ([I, O/g, k...] for IOX, [k..., O/g, I]
        for XOI), dequantized per output channel: oneDNN takes g * O/g scales over the
        O/g axis, as its fused int8 ConvTranspose does (output channel of group j, o:
        j * O/g + o). With one output channel per group (depthwise) that is a scale per
        group along the I axis: rewritten so (each repeated I/g times); True if done."""
        users = [(op, i) for op in self.doc.ops for i, lt in enumerate(op.inputs) if lt.id == rec.outputs[0].id]
        if len(users) != 1 or users[0][0].kind != "ConvTranspose" or users[0][1] != 1:
            return False
        conv = {k: self._value(a, rec.where) for k, a in users[0][0].attrs.items()}
        g, fmt, rank = conv.get("groups", 1), conv.get("weights_format", "XOI"), len(shape)
        o_axis, i_axis = (1, 0) if fmt == "IOX" else (rank - 2, rank - 1)
        scales, zps = list(attrs.get("scales") or ()), list(attrs.get("zps") or ())
        if (not isinstance(g, int) or g < 1 or axis != o_axis or shape[o_axis] != 1 or len(scales) != g
                or not isinstance(shape[i_axis], int) or shape[i_axis] % g or (zps and len(zps) != g)):
            return False
        per_group = shape[i_axis] // g
        attrs["axis"] = i_axis
        attrs["scales"] = [s for s in scales for _ in range(per_group)]
        if zps:
            attrs["zps"] = [z for z in zps for _ in range(per_group)]
        return True

    def _arity(self, rec: OpRec, info: Optional[KindInfo], schema, n_outputs: int) -> bool:
        ok = True
        for what, n, (lo, hi), names in (("input", len(rec.inputs), schema.inputs, info.inputs if info else ()),
                                         ("output", n_outputs, schema.outputs, info.outputs if info else ())):
            if hi >= 0 and n > hi:
                extra = [names[i] if i < len(names) else str(i) for i in range(hi, n)]
                self.block(f"{rec.kind} {what}{'s' if len(extra) > 1 else ''} {', '.join(extra)}")
                ok = False
            elif n < lo:
                raise GraphError(f"{rec.where}: takes at least {lo} {what}s, got {n}")
        return ok

    def attrs(self, rec: OpRec, info: Optional[KindInfo], schema):
        known = info.attrs if info else {}
        out: Dict[str, Any] = {}
        inf_as_zero = False
        for name, a in rec.attrs.items():
            ai = known.get(name)
            value = self._value(a, rec.where)
            if rec.kind == "SoftMax" and name == "mode" and value == "inf_as_zero" and name not in schema.attrs:
                if self.decompose:
                    inf_as_zero = True
                    continue
                self.block("SoftMax mode=inf_as_zero")
                continue
            if name in schema.attrs:
                if ai is not None and isinstance(value, str):
                    value = ai.values.get(value, value)
                out[name] = value
            elif ai is not None and (value == ai.default or value in ai.accepted):
                continue
            else:
                self.block(f"{rec.kind} attribute {name}={_attr_text(value)}")
        for name, ai in known.items():
            if name not in rec.attrs and name in schema.attrs and ai.default is not REQUIRED:
                d = ai.default
                out[name] = ai.values.get(d, d) if isinstance(d, str) else (list(d) if isinstance(d, list) else d)
        if rec.kind == "ConvTranspose" and out.get("output_padding") and not any(out["output_padding"]):
            out["output_padding"] = []  # oneDNN's files write DNNL_MAX_NDIMS zeros: no output padding
        if rec.kind == "LayerNorm" and "keep_stats" not in rec.attrs and "keep_stats" in schema.attrs:
            out["keep_stats"] = len(rec.outputs) > 1  # oneDNN's default (true) asks for the stats outputs
        return out, inf_as_zero

    def _value(self, a, where: str):
        if a.type == "dyngraph_expr":
            return a.value if isinstance(a.value, int) else parse_expr(a.value, self.doc.symbols, where)
        if a.type == "dyngraph_exprs":
            return [x if isinstance(x, int) else parse_expr(x, self.doc.symbols, where) for x in a.value]
        return a.value

    def _softmax_inf_as_zero(self, rec: OpRec, ins, outs, attrs) -> List[Op]:
        """SoftMax with mode=inf_as_zero, exactly, from dyngraph's ops: a row
        whose maximum is -inf (every element -inf) gives zeros, any other row
        is the plain softmax."""
        self.decomposed.append("SoftMax mode=inf_as_zero")
        from ..dtypes import DataType

        x, y = ins[0], outs[0]
        axis = attrs.get("axis", 1)
        base = rec.name
        shape, reduced = y.shape, None
        if x.shape is not None and -len(x.shape) <= axis < len(x.shape):
            reduced = list(x.shape)
            reduced[axis] = 1
        sm = self.new_lt(y.dtype, shape)
        row_max = self.new_lt(x.dtype, reduced)
        minus_inf = self.new_lt(x.dtype, [])
        all_inf = self.new_lt(DataType.boolean, reduced)
        zero = self.new_lt(y.dtype, [])
        return [
            Op(rec.id, OpKind.SoftMax, [x], [sm], attrs, base),
            self.new_op(OpKind.ReduceMax, [x], [row_max], {"axes": [axis], "keep_dims": True}, f"{base}.row_max"),
            self.new_op(OpKind.Full, [], [minus_inf], {"shape": [], "value": -math.inf}, f"{base}.minus_inf"),
            self.new_op(OpKind.Equal, [row_max, minus_inf], [all_inf], {}, f"{base}.all_minus_inf"),
            self.new_op(OpKind.Full, [], [zero], {"shape": [], "value": 0.0}, f"{base}.zero"),
            self.new_op(OpKind.Select, [all_inf, zero, sm], [y], {}, f"{base}.inf_as_zero"),
        ]


    def _softmax_stats(self, rec: OpRec, x, stats, axis: int, inf_as_zero: bool) -> List[Op]:
        """SoftMax's optional ``stats`` output, as oneDNN defines it:
        max + log(sum(exp(x - max))) over the axis (kept as a dimension of 1).
        With mode=inf_as_zero a row of all -inf gives -inf (log of an empty
        sum), not the NaN that -inf - -inf would."""
        self.decomposed.append("SoftMax stats output")
        from ..dtypes import DataType

        base, dt = f"{rec.name}.stats", x.dtype
        if not inf_as_zero:
            return self._logsumexp(None, x, stats, axis, base)
        lse, minus_inf, all_inf = self.new_lt(dt), self.new_lt(dt, []), self.new_lt(DataType.boolean)
        ops = self._logsumexp(None, x, lse, axis, base)
        row_max = ops[0].outputs[0]
        return ops + [
            self.new_op(OpKind.Full, [], [minus_inf], {"shape": [], "value": -math.inf}, f"{base}.minus_inf"),
            self.new_op(OpKind.Equal, [row_max, minus_inf], [all_inf], {}, f"{base}.all_minus_inf"),
            self.new_op(OpKind.Select, [all_inf, minus_inf, lse], [stats], {}, base),
        ]


def wildcard(oid: int, ins, outs, name: str) -> Op:
    return Op(oid, OpKind.Wildcard, ins, outs, {}, name)


def import_graph(src, overrides: Optional[Overrides] = None, decompose: bool = True,
                 wildcards: bool = False) -> Imported:
    """Read a graph file, apply benchdnn-style rewrites, map it to a finalized dyngraph Graph.

    With ``wildcards`` an op dyngraph cannot take becomes a Wildcard op (a
    partition of its own, not run by the backend) instead of refusing the
    file: the graph can still be drawn and partitioned."""
    doc = read_document(src)
    infer_internal = apply_overrides(doc, overrides) if overrides is not None else False
    m = _Mapper(doc, infer_internal, decompose, wildcards)
    ops: List[Op] = []
    groups: List[source.Group] = []
    for rec in doc.ops:
        made = m.op(rec)
        groups.append(source.Group(rec, [o.id for o in made]))
        ops.extend(made)
    if m.blockers and not wildcards:
        raise UnsupportedError(f"dyngraph has no {'; no '.join(m.blockers)}", m.blockers)
    for _ in range(len(ops) + 1):
        g = Graph()
        for op in ops:
            g.add_op(op)
        try:
            g.finalize()
            break
        except DyngraphError as e:
            err = classify(e, ops, m.kinds)
            bad = _op_named(e, ops) if wildcards else None
            if bad is None or bad.kind is OpKind.Wildcard:
                raise err from e
            ops[ops.index(bad)] = wildcard(bad.id, bad.inputs, bad.outputs, bad.name)
            m.kinds.setdefault(bad.id, bad.kind.name)
    source.attach(g, doc, groups, infer_internal)  # what to_json writes back
    return Imported(g, doc, [i for i in doc.graph_inputs()], doc.graph_outputs(), m.kinds, m.decomposed)


def _op_named(e: Exception, ops: List[Op]) -> Optional[Op]:
    """The op an error message is about (the longest op label it contains)."""
    msg, found = str(e), None
    for o in ops:
        if o.label in msg and (found is None or len(o.label) > len(found.label)):
            found = o
    if found is None:  # "tensor 7: rank 5 is above ...": the op that produces it
        m = re.match(r"tensor (\d+)\b", msg)
        if m:
            tid = int(m.group(1))
            found = next((o for o in ops if any(lt.id == tid for lt in o.outputs)), None)
    return found


def from_json(src, *, in_shapes=None, op_attrs=None, dt=None, op_kind=None, mb=0, tensor_property=None,
              dynamic=None, decompose: bool = True, wildcards: bool = False) -> Graph:
    """A finalized graph from oneDNN Graph JSON (a path, JSON text, bytes or a dict).

    Rewrites in benchdnn's spellings (strings) or as dicts: ``in_shapes``
    ({id: shape} or ``"0:2x64+1:64x32"``), ``op_attrs`` ({op id: {name:
    value}} or ``"0:axis:1"``), ``dt`` (``"f16"`` or {id: dtype}), ``op_kind``,
    ``mb``, ``tensor_property``; ``dynamic`` marks dimensions of graph inputs
    dynamic: ``["0:0:batch", "1:0:batch"]``, ``[(0, 0, "batch")]`` or
    ``{(0, 0): dg.Dim("batch", max=64)}`` (one name, one dimension). With
    ``decompose`` (the default) a oneDNN form dyngraph lacks as one op but
    can express exactly with several (SoftMax ``mode=inf_as_zero`` and its
    ``stats`` output; ReduceL1, ReduceL2, LogSoftmax; an op of mixed float
    types, computed in f32 between casts) is expressed so; otherwise it is
    refused. With ``wildcards`` an op dyngraph
    cannot take becomes a Wildcard op (its own unsupported partition)
    instead of refusing the file: the graph can be partitioned, drawn and
    written back (:func:`~.writer.to_json` writes the file's ops, those
    dyngraph cannot run included).
    """
    ov = make_overrides(in_shapes, op_attrs, dt, op_kind, mb, tensor_property, dynamic)
    return import_graph(src, ov, decompose, wildcards).graph


# a rank above what tensors (6) or the op's kind (4: Gather, RoPE, attention...) take (dyngraph.ops.registry.check_ranks)
_RANK_RE = re.compile(r"rank (\d+) is above the supported maximum|a tensor of rank (\d+); (\w+) takes rank")


def classify(e: DyngraphError, ops: List[Op], kinds: Dict[int, str]) -> DyngraphError:
    """A rule's refusal of a well-formed oneDNN op, named as the gap it is
    (mixed precision, a rank the op takes not, 1-D MatMul); other errors as they are."""
    msg = str(e)
    m = _RANK_RE.search(msg)
    if m:
        what = f"rank {m.group(1) or m.group(2)} tensors" + (f" ({m.group(3)})" if m.group(3) else "")
        return UnsupportedError(f"{what}: {msg}", [what])
    op = _op_named(e, ops)
    if op is None:
        return e
    kind = kinds.get(op.id, op.kind.name)
    floats = {lt.dtype for lt in op.inputs + op.outputs if lt.dtype.is_float}
    feature = None
    if isinstance(e, DTypeError) and len(floats) > 1:
        feature = f"mixed precision ({kind})"
    elif op.kind is OpKind.MatMul and any(lt.shape is not None and len(lt.shape) == 1 for lt in op.inputs[:2]):
        feature = "1-D MatMul input"
    elif isinstance(e, ShapeError) and op.kind is OpKind.LayerNorm and op.attrs.get("keep_stats"):
        feature = "LayerNorm keep_stats"
    elif op.kind in (OpKind.ReduceSum, OpKind.ReduceMean, OpKind.ReduceMax, OpKind.ReduceMin) and not op.attrs.get("axes"):
        feature = f"{kind} with empty axes"
    return UnsupportedError(f"{feature}: {msg}", [feature]) if feature else e
