"""Mutators of dyngraph artifacts.

Structure-aware mutators edit the decoded IR (irmodel.Program): dimensions,
expression nodes (ops, operands, huge/negative/zero constants, deep chains,
shared DAGs that are exponential as trees), op kinds, input/output lists,
attributes (names, types, values: NaN, inf, negative eps, out-of-range axes),
symbol ranges, symbol sources, guards, tensor dtypes/properties/storage types,
data sizes and contents. The result is encoded again, so it is a well-formed
FlatBuffer that reaches the semantic checks. Byte-level mutators (bit flips,
interesting words, truncation, insertion, deletion, splicing of two files)
work on the encoded IR.

Every mutator takes a ``random.Random``: a run with ``--seed`` is repeatable.
"""

from __future__ import annotations

import math
import os
import random
import re
import struct
from typing import Callable, Dict, List, Optional, Tuple

from . import irmodel as ir

I64_MAX = (1 << 63) - 1
I64_MIN = -(1 << 63)

# sizes that wrap, overflow, divide by zero or sit at a boundary
INTS = [0, 1, -1, 2, 3, 4, 5, 7, 8, 16, 31, 32, 33, 63, 64, 127, 128, 255, 256, 1023, 1024, 4096, 65535, 65536,
        (1 << 20), (1 << 31) - 1, 1 << 31, -(1 << 31), (1 << 32) - 1, 1 << 32, 1 << 40, 1 << 53, 1 << 61, 1 << 62,
        I64_MAX, I64_MIN, I64_MAX - 1, I64_MIN + 1, 3074457345618258603, 6148914691236517206, 384307168202282326,
        (1 << 63) // 24, -2, -3, -1000]
SMALL = [0, 1, 2, 3, -1, -2, 4, 5, 6, 7, 8, 16, 32, 64]
FLOATS = [math.nan, -math.nan, math.inf, -math.inf, -1e-5, -1.0, -0.0, 0.0, 5e-324, 1e-45, 1e-30, 1e30, -1e30, 1e308,
          3.4e38, 3.5e38, 1.0, 0.5, 2.0 ** 31, 2.0 ** 63, 1e-6, 1e-5, 12345.678]
# f32 / f16 bit patterns for weight and quantization-scale corruption
F32_WORDS = [0x7FC00000, 0x7F800000, 0xFF800000, 0x00000001, 0x7F7FFFFF, 0x80000000, 0xFFFFFFFF]
F16_WORDS = [0x7E00, 0x7C00, 0xFC00, 0x0001, 0x7BFF, 0x8000, 0xFFFF]

N_EXPR_OPS = 9  # CONST .. MAXIMUM


def _n_codes(enum: str) -> int:
    """1 + the largest code of one of the schema's generated Python enums (read as text: the fuzzer's
    parent never imports dyngraph), so that mutated codes reach every value the IR has (and one past)."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "api", "dyngraph", "fb", f"{enum}.py")
    with open(path) as f:
        return 1 + max(int(v) for v in re.findall(r"^\s*[A-Za-z_]\w* = (\d+)$", f.read(), re.M))


N_OPKINDS = _n_codes("OpKind") - 1  # OpKind.End
N_DTYPES = _n_codes("DataType")
N_STORAGE = _n_codes("StorageType")
ADD, MUL, SUB, FLOORDIV, MOD, MIN, MAX = 2, 4, 3, 5, 6, 7, 8


def _int(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.6:
        return rng.choice(INTS)
    if r < 0.85:
        return rng.choice(SMALL)
    return rng.randint(I64_MIN, I64_MAX)


def _float(rng: random.Random) -> float:
    return rng.choice(FLOATS) if rng.random() < 0.85 else rng.uniform(-10, 10)


class Ctx:
    """What the mutators know beyond the program: the op schema (attribute
    names and kinds per op kind) and the other seeds (for splicing)."""

    def __init__(self, schema: Dict[str, dict], bodies: List[bytes]):
        self.schema = schema
        self.by_code = {v["code"]: (k, v) for k, v in schema.items()}
        self.attr_names = sorted({a for v in schema.values() for a in v["attrs"]}) or ["axis"]
        self.bodies = bodies


# ------------------------------------------------------------ helpers


def _exprs(m: ir.Program) -> list:
    if m.exprs is None:
        m.exprs = []
    return m.exprs


def _node(m: ir.Program, op: int, a: int, b: int = 0) -> int:
    ex = _exprs(m)
    ex.append((op, a, b))
    return len(ex) - 1


def _const(m: ir.Program, v: int) -> int:
    return _node(m, 0, v)


def _some_node(rng: random.Random, m: ir.Program) -> int:
    n = len(_exprs(m))
    r = rng.random()
    if n and r < 0.7:
        return rng.randrange(n)
    if r < 0.85:
        return _const(m, _int(rng))
    return rng.choice([-1, n, n + 1, 1 << 30, -(1 << 31), (1 << 31) - 1])


def _some_tensor(rng: random.Random, m: ir.Program) -> int:
    n = len(m.tensors or [])
    if n and rng.random() < 0.85:
        return rng.randrange(n)
    return rng.choice([-1, n, n + 1, (1 << 31) - 1, -(1 << 31)])


def _symbol_node(m: ir.Program) -> Optional[int]:
    for i, (op, _a, _b) in enumerate(_exprs(m)):
        if op == 1:
            return i
    return None


def _expr_sinks(m: ir.Program):
    """Places that hold an expression node: (setter, description)."""
    sinks = []
    for ti, t in enumerate(m.tensors or []):
        for d in range(len(t.shape or [])):
            sinks.append((lambda v, t=t, d=d: t.shape.__setitem__(d, v), f"tensor {ti} dim {d}"))
    for oi, o in enumerate(m.ops or []):
        for a in o.attrs or []:
            for k in range(len(a.exprs or [])):
                sinks.append((lambda v, a=a, k=k: a.exprs.__setitem__(k, v), f"op {oi} attr {a.name} expr {k}"))
    for gi, g in enumerate(m.guards or []):
        sinks.append((lambda v, g=g: setattr(g, "lhs", v), f"guard {gi} lhs"))
        sinks.append((lambda v, g=g: setattr(g, "rhs", v), f"guard {gi} rhs"))
    for si, s in enumerate(m.sources or []):
        sinks.append((lambda v, s=s: setattr(s, "offset", v), f"source {si} offset"))
    return sinks


def _point_somewhere(rng: random.Random, m: ir.Program, node: int) -> str:
    sinks = _expr_sinks(m)
    if not sinks:
        return "nowhere"
    setter, where = rng.choice(sinks)
    setter(node)
    return where


def _list_edit(rng: random.Random, lst: Optional[list], make: Callable[[], int]) -> Tuple[list, str]:
    lst = list(lst or [])
    r = rng.random()
    if lst and r < 0.25:
        i = rng.randrange(len(lst))
        lst.pop(i)
        return lst, f"drop [{i}]"
    if r < 0.45:
        v = make()
        lst.insert(rng.randint(0, len(lst)), v)
        return lst, f"insert {v}"
    if lst and r < 0.6:
        lst.append(rng.choice(lst))
        return lst, "duplicate"
    if len(lst) > 1 and r < 0.75:
        i, j = rng.sample(range(len(lst)), 2)
        lst[i], lst[j] = lst[j], lst[i]
        return lst, f"swap {i},{j}"
    if lst:
        i = rng.randrange(len(lst))
        lst[i] = make()
        return lst, f"[{i}]={lst[i]}"
    return lst, "noop"


# ------------------------------------------------------------ structure-aware mutators


def m_dim(rng, m, ctx):
    ts = [t for t in m.tensors or [] if t.shape]
    if not ts:
        return None
    t = rng.choice(ts)
    d = rng.randrange(len(t.shape))
    r = rng.random()
    if r < 0.75:
        v = _int(rng)
        t.shape[d] = _const(m, v)
        return f"dim {t.name}[{d}]={v}"
    t.shape[d] = _some_node(rng, m)
    return f"dim {t.name}[{d}]=node {t.shape[d]}"


def m_rank(rng, m, ctx):
    ts = [t for t in m.tensors or []]
    if not ts:
        return None
    t = rng.choice(ts)
    shape = list(t.shape or [])
    r = rng.random()
    if shape and r < 0.4:
        shape.pop(rng.randrange(len(shape)))
    elif r < 0.8:
        shape.insert(rng.randint(0, len(shape)), _const(m, rng.choice([1, 1, 2, 0, 3])))
    else:
        shape = shape + [_const(m, 1)] * rng.randint(1, 6)  # rank above 4
    t.shape = shape
    return f"rank {t.name} -> {len(shape)}"


def m_expr(rng, m, ctx):
    ex = _exprs(m)
    if not ex:
        return None
    i = rng.randrange(len(ex))
    op, a, b = ex[i]
    r = rng.random()
    if r < 0.3:
        op = rng.randrange(N_EXPR_OPS) if rng.random() < 0.9 else rng.choice([9, 10, 127, -128, -1])
        # keep operands meaningful for the new op when possible
        if op == 0:
            a = _int(rng)
        elif op == 1:
            a = rng.randrange(max(1, len(m.symbols or [])))
        elif op >= 2 and i > 0 and not (0 <= a < i):
            a, b = rng.randrange(i), rng.randrange(i)
        what = f"op={op}"
    elif op == 0:
        a = _int(rng)
        what = f"const={a}"
    elif op == 1:
        a = rng.choice([-1, len(m.symbols or []), 0, 1, I64_MAX])
        what = f"symbol={a}"
    else:
        v = rng.choice([i, i + 1, -1, rng.randrange(max(1, i)), I64_MAX, len(ex) + 5])
        if rng.random() < 0.5:
            a = v
        else:
            b = v
        what = f"operands={a},{b}"
    ex[i] = (op, a, b)
    return f"expr {i} {what}"


def m_arith(rng, m, ctx):
    """A new arithmetic node over existing ones with an edge-case constant
    (x // 0, x % 0, x * 2^62, x - 2^63, min(x, 0)...), used somewhere."""
    base = _some_node(rng, m) if _exprs(m) else _const(m, 1)
    c = _const(m, rng.choice([0, -1, 1 << 62, I64_MAX, I64_MIN, 2, -2, 3]))
    op = rng.choice([ADD, SUB, MUL, FLOORDIV, MOD, MIN, MAX])
    a, b = (base, c) if rng.random() < 0.7 else (c, base)
    n = _node(m, op, a, b)
    return f"arith op {op} -> {_point_somewhere(rng, m, n)}"


def m_deep_chain(rng, m, ctx):
    """A value kept equal (x + 0 + 0 ...) through a chain of 100..30,000 nodes."""
    length = int(math.exp(rng.uniform(math.log(100), math.log(30000))))
    sinks = _expr_sinks(m)
    if not sinks:
        return None
    setter, where = rng.choice(sinks)
    ex = _exprs(m)
    # start from a constant or symbol node that exists
    start = _symbol_node(m) if rng.random() < 0.3 else None
    if start is None:
        start = _const(m, rng.choice([1, 2, 4, 6, 8, 16, 32, 64]))
    zero = _const(m, 0)
    n = start
    for _ in range(length):
        ex.append((ADD, n, zero))
        n = len(ex) - 1
    setter(n)
    return f"deep chain of {length} -> {where}"


def m_shared_dag(rng, m, ctx):
    """A DAG of k levels that shares its nodes: linear as a DAG, 2^k or 3^k as a tree."""
    k = rng.randint(4, 24) if rng.random() < 0.7 else rng.randint(24, 80)
    sinks = _expr_sinks(m)
    if not sinks:
        return None
    setter, where = rng.choice(sinks)
    ex = _exprs(m)
    sym = _symbol_node(m)
    style = rng.choice(["keep", "add", "mul", "max", "pow"])
    n = sym if (sym is not None and style in ("pow", "keep")) else _const(m, rng.choice([1, 2, 3]))
    for _ in range(k):
        if style == "keep":  # (x + x) - x == x
            ex.append((ADD, n, n))
            ex.append((SUB, len(ex) - 1, n))
        elif style == "add":
            ex.append((ADD, n, n))
        elif style == "mul" or style == "pow":
            ex.append((MUL, n, n))
        else:
            ex.append((MAX, n, n))
        n = len(ex) - 1
    setter(n)
    return f"shared DAG {style} x{k} -> {where}"


def m_unused_nodes(rng, m, ctx):
    count = rng.choice([1000, 20000, 100000])
    ex = _exprs(m)
    base = len(ex)
    ex.append((0, 1, 0))
    for i in range(count):
        ex.append((ADD, base + i, base))
    return f"{count} unused nodes"


def m_op_kind(rng, m, ctx):
    if not m.ops:
        return None
    o = rng.choice(m.ops)
    old = o.kind
    o.kind = rng.randrange(N_OPKINDS) if rng.random() < 0.9 else rng.choice([N_OPKINDS, N_OPKINDS + 1, 0xFFFF])
    return f"op {o.name} kind {old}->{o.kind}"


def m_op_io(rng, m, ctx):
    if not m.ops:
        return None
    o = rng.choice(m.ops)
    if rng.random() < 0.6:
        o.inputs, what = _list_edit(rng, o.inputs, lambda: _some_tensor(rng, m))
        return f"op {o.name} inputs {what}"
    o.outputs, what = _list_edit(rng, o.outputs, lambda: _some_tensor(rng, m))
    return f"op {o.name} outputs {what}"


def m_fanout(rng, m, ctx):
    """Copies of one op, each with the same long input list: written with sharing (the
    fuzzer's encode(share=...)), a small file whose tables refer to one vector many times."""
    if not m.ops or not m.tensors:
        return None
    o = rng.choice(m.ops)
    width = rng.choice([33, 64, 1000, 4096, 20000])
    ins = (o.inputs or [_some_tensor(rng, m)])[:2] * width  # (the op may be an earlier fanout's copy)
    copies = min(rng.choice([2, 16, 200]), max(1, (1 << 21) // len(ins)))  # 2 M inputs at most: 8 MB unshared
    outs = [t for t in (o.outputs or []) if 0 <= t < len(m.tensors)]
    fresh = rng.random() < 0.7  # each copy writes a new tensor like the op's output: a valid program
    for i in range(copies):
        mine = list(o.outputs or [])
        if fresh and outs:
            t = m.tensors[outs[0]]
            m.tensors.append(ir.Tensor(id=max(x.id for x in m.tensors) + 1, name=t.name, dtype=t.dtype,
                                       shape=t.shape, property=t.property, storage=t.storage))
            mine = [len(m.tensors) - 1]
        m.ops.append(ir.Op(id=o.id + 1 + i, kind=o.kind, name=o.name, inputs=list(ins), outputs=mine, attrs=o.attrs))
    return f"op {o.name} x{copies} with {len(ins)} inputs"


def _attr_value(rng, m, a: ir.Attr, kind: Optional[str] = None):
    kind = kind or rng.choice(["int", "ints", "float", "floats", "str", "exprs"])
    a.ints = a.floats = a.str = a.exprs = None
    if kind in ("int", "bool", "dtype", "expr"):
        a.type, a.ints = 0, [_int(rng) if rng.random() < 0.7 else rng.choice(SMALL)]
        if kind == "expr" and rng.random() < 0.5:
            a.type, a.ints, a.exprs = 5, None, [_some_node(rng, m)]
    elif kind == "ints":
        a.type, a.ints = 1, [rng.choice(SMALL) if rng.random() < 0.6 else _int(rng) for _ in range(rng.randint(0, 6))]
    elif kind == "float":
        a.type, a.floats = 2, [_float(rng)]
    elif kind == "floats":
        a.type, a.floats = 3, [_float(rng) for _ in range(rng.randint(0, 4))]
    elif kind == "str":
        a.type, a.str = 4, rng.choice(["", "tanh", "erf", "none", "x" * 300, "\u00e9", "neox", "normal"])
    else:
        a.type, a.exprs = 5, [_some_node(rng, m) for _ in range(rng.randint(0, 5))]
    if rng.random() < 0.1:  # a type code that disagrees with the value given
        a.type = rng.choice([0, 1, 2, 3, 4, 5, 6, 100, -1])


def m_attr(rng, m, ctx: Ctx):
    if not m.ops:
        return None
    o = rng.choice(m.ops)
    attrs = list(o.attrs or [])
    spec = ctx.by_code.get(o.kind, (None, {"attrs": {}}))[1]["attrs"]
    r = rng.random()
    if attrs and r < 0.45:
        a = rng.choice(attrs)
        kind = spec.get(a.name, {}).get("kind") if rng.random() < 0.7 else None
        _attr_value(rng, m, a, kind)
        what = f"value of {a.name} ({kind})"
    elif attrs and r < 0.55:
        a = rng.choice(attrs)
        old = a.name
        a.name = rng.choice(ctx.attr_names + ["", "Epsilon", "axis ", "\x00"])
        what = f"rename {old}->{a.name!r}"
    elif attrs and r < 0.65:
        a = attrs.pop(rng.randrange(len(attrs)))
        what = f"remove {a.name}"
    elif attrs and r < 0.7:
        attrs.append(ir.Attr(**vars(rng.choice(attrs))))
        what = "duplicate"
    else:
        names = list(spec) if spec and rng.random() < 0.8 else ctx.attr_names
        name = rng.choice(names)
        a = ir.Attr(name=name)
        _attr_value(rng, m, a, spec.get(name, {}).get("kind"))
        attrs.append(a)
        what = f"add {name}"
    o.attrs = attrs
    return f"op {o.name} attr {what}"


def m_symbol(rng, m, ctx):
    if not m.symbols:
        return None
    s = rng.choice(m.symbols)
    if rng.random() < 0.5:
        s.min = rng.choice([0, -1, 1, 2, I64_MAX, 1 << 62, _int(rng)])
    else:
        s.max = rng.choice([0, 1, 2, I64_MAX, 1 << 62, 1 << 31, _int(rng)])
    return f"symbol {s.name} [{s.min}, {s.max}]"


def m_source(rng, m, ctx):
    srcs = m.sources or []
    r = rng.random()
    if srcs and r < 0.15:
        srcs.pop(rng.randrange(len(srcs)))
        return "drop a source"
    if srcs and r < 0.25:
        srcs.append(ir.Source(**vars(rng.choice(srcs))))
        return "duplicate a source"
    if not srcs:
        return None
    s = rng.choice(srcs)
    f = rng.choice(["symbol", "kind", "input", "index", "coeff", "offset", "ref", "flag"])
    if f == "kind":
        v = rng.choice([0, 1, 2, 3, 4, 5, -1])
    elif f == "coeff":
        v = rng.choice([0, -1, 2, 3, I64_MAX, I64_MIN, 1 << 62])
    elif f == "offset":
        v = _some_node(rng, m)
    else:
        v = rng.choice(SMALL + [(1 << 31) - 1, -(1 << 31), 1 << 20])
    setattr(s, f, v)
    return f"source {f}={v}"


def m_guard(rng, m, ctx):
    gs = m.guards or []
    r = rng.random()
    if gs and r < 0.5:
        if rng.random() < 0.5:
            m.guards = []
            return "drop all guards"
        gs.pop(rng.randrange(len(gs)))
        return "drop a guard"
    if gs and r < 0.8:
        g = rng.choice(gs)
        setattr(g, rng.choice(["lhs", "rhs"]), _some_node(rng, m))
        return "retarget a guard"
    m.guards = gs + [ir.Guard(_some_node(rng, m), _some_node(rng, m), "fuzz")]
    return "add a guard"


def m_data(rng, m, ctx):
    ds = m.data or []
    if not ds:
        return None
    d = rng.choice(ds)
    r = rng.random()
    data = d.data or b""
    if r < 0.2:
        cut = rng.choice([0, 1, len(data) // 2, max(0, len(data) - 1), max(0, len(data) - 32)])
        d.data = data[:cut]
        return f"data of {d.tensor} truncated to {cut}"
    if r < 0.3:
        d.data = data + bytes(rng.choice([1, 2, 32, 64, 4096]))
        return f"data of {d.tensor} extended"
    if r < 0.4:
        m.data = [x for x in ds if x is not d]
        return f"data of {d.tensor} removed"
    if r < 0.5:
        ds.append(ir.Data(d.tensor, data))
        return f"data of {d.tensor} twice"
    if r < 0.6:
        d.tensor = _some_tensor(rng, m)
        return f"data moved to tensor {d.tensor}"
    if r < 0.65:
        d.data = None
        return "data vector absent"
    # corrupt values: NaN/inf floats, or f16 scales of quantized blocks
    buf = bytearray(data)
    if len(buf) < 4:
        return None
    for _ in range(rng.randint(1, 8)):
        if rng.random() < 0.5:
            off = rng.randrange(0, len(buf) - 3) & ~3
            struct.pack_into("<I", buf, off, rng.choice(F32_WORDS))
        else:
            off = rng.randrange(0, len(buf) - 1) & ~1
            struct.pack_into("<H", buf, off, rng.choice(F16_WORDS))
    d.data = bytes(buf)
    return f"data of {d.tensor} values corrupted"


def m_tensor(rng, m, ctx):
    if not m.tensors:
        return None
    ti = rng.randrange(len(m.tensors))
    t = m.tensors[ti]
    f = rng.choice(["dtype", "property", "storage", "storage", "id", "name"])
    if f == "dtype":
        t.dtype = rng.randrange(N_DTYPES) if rng.random() < 0.9 else rng.choice([N_DTYPES, N_DTYPES + 1, 127, -1])
    elif f == "property":
        t.property = rng.randrange(3) if rng.random() < 0.9 else rng.choice([3, 127, -1])
    elif f == "storage":
        t.storage = rng.randrange(N_STORAGE) if rng.random() < 0.9 else rng.choice([N_STORAGE, N_STORAGE + 1, 127, -1])
    elif f == "id":
        t.id = rng.choice([m.tensors[rng.randrange(len(m.tensors))].id, -1, I64_MAX, 0])
    else:
        t.name = rng.choice(["", "x" * 1000, "\u2603", None])
    return f"tensor {ti} {f}={getattr(t, f)!r}"


def m_program_io(rng, m, ctx):
    if rng.random() < 0.5:
        m.inputs, what = _list_edit(rng, m.inputs, lambda: _some_tensor(rng, m))
        return f"program inputs {what}"
    m.outputs, what = _list_edit(rng, m.outputs, lambda: _some_tensor(rng, m))
    return f"program outputs {what}"


def m_ops_order(rng, m, ctx):
    ops = m.ops or []
    if not ops:
        return None
    r = rng.random()
    if r < 0.4 and len(ops) > 1:
        i, j = rng.sample(range(len(ops)), 2)
        ops[i], ops[j] = ops[j], ops[i]
        return f"swap ops {i},{j}"
    if r < 0.7:
        i = rng.randrange(len(ops))
        ops.pop(i)
        return f"drop op {i}"
    i = rng.randrange(len(ops))
    ops.insert(rng.randint(0, len(ops)), ir.Op(**vars(ops[i])))
    return f"duplicate op {i}"


def m_version(rng, m, ctx):
    m.version = rng.choice([0, 2, 0xFFFFFFFF])
    return f"version {m.version}"


STRUCTURE = [
    (m_dim, 10), (m_rank, 3), (m_expr, 8), (m_arith, 6), (m_deep_chain, 2), (m_shared_dag, 3), (m_unused_nodes, 0.3),
    (m_op_kind, 4), (m_op_io, 5), (m_attr, 12), (m_symbol, 4), (m_source, 5), (m_guard, 4), (m_data, 6),
    (m_tensor, 6), (m_program_io, 3), (m_ops_order, 2), (m_version, 0.3),
    (m_fanout, 1),
]
_S_FUNCS = [f for f, _ in STRUCTURE]
_S_WEIGHTS = [w for _, w in STRUCTURE]


def mutate_structure(rng: random.Random, model: ir.Program, ctx: Ctx, n: Optional[int] = None) -> Tuple[ir.Program, List[str]]:
    m = model.clone()
    done = []
    for _ in range(n or rng.choice([1, 1, 1, 2, 2, 3])):
        for _try in range(5):
            f = rng.choices(_S_FUNCS, _S_WEIGHTS)[0]
            what = f(rng, m, ctx)
            if what is not None:
                done.append(what)
                break
    return m, done


# ------------------------------------------------------------ byte-level mutators


def b_flip(rng, buf: bytearray, ctx):
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8)
    return buf, "bit flips"


def b_byte(rng, buf, ctx):
    for _ in range(rng.randint(1, 4)):
        buf[rng.randrange(len(buf))] = rng.choice([0, 0xFF, 0x7F, 0x80, 0x01, 0xFE])
    return buf, "interesting bytes"


def b_word(rng, buf, ctx):
    size = rng.choice([4, 8])
    if len(buf) <= size:
        return buf, "noop"
    off = rng.randrange(0, len(buf) - size) & ~(size - 1)
    v = _int(rng)
    struct.pack_into("<q" if size == 8 else "<i", buf, off, ir._wrap(v, 8 * size))
    return buf, f"word@{off}={v}"


def b_truncate(rng, buf, ctx):
    cut = rng.randrange(len(buf))
    return buf[:cut], f"truncate at {cut}"


def b_insert(rng, buf, ctx):
    i = rng.randrange(len(buf) + 1)
    n = rng.choice([1, 4, 8, 24, 100])
    buf[i:i] = bytes(rng.randrange(256) for _ in range(n))
    return buf, f"insert {n}@{i}"


def b_delete(rng, buf, ctx):
    i = rng.randrange(len(buf))
    n = rng.choice([1, 4, 8, 24, 100])
    del buf[i : i + n]
    return buf, f"delete {n}@{i}"


def b_splice(rng, buf, ctx: Ctx):
    other = rng.choice(ctx.bodies)
    i = rng.randrange(len(buf))
    j = rng.randrange(len(other))
    return bytearray(bytes(buf[:i]) + other[j:]), f"splice @{i}+{j}"


def b_dup(rng, buf, ctx):
    i = rng.randrange(len(buf))
    n = rng.choice([4, 8, 24, 64])
    buf[i:i] = buf[i : i + n]
    return buf, f"duplicate {n}@{i}"


BYTES = [(b_flip, 5), (b_byte, 3), (b_word, 5), (b_truncate, 2), (b_insert, 1), (b_delete, 1), (b_splice, 1), (b_dup, 1)]
_B_FUNCS = [f for f, _ in BYTES]
_B_WEIGHTS = [w for _, w in BYTES]


def mutate_bytes(rng: random.Random, body: bytes, ctx: Ctx) -> Tuple[bytes, List[str]]:
    buf = bytearray(body)
    done = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        if not buf:
            break
        f = rng.choices(_B_FUNCS, _B_WEIGHTS)[0]
        buf, what = f(rng, buf, ctx)
        done.append(what)
    return bytes(buf), done
