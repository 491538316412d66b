"""The exported program as a functional one, without torch's retrace.

``torch.export`` gives a training-IR program: ops before decomposition
(``linear``, ``reshape``, ``to``...) and in-place ops (a KV cache's
``index_copy_``). ``ExportedProgram.run_decompositions`` makes it functional
core ATen by tracing the whole program again (most of the compile time of a
real model). When every op of the program has a converter, dyngraph needs
neither the decomposition nor the retrace, only functional form: each
in-place op on a buffer, a user input or an intermediate becomes its
functional overload (``index_copy_`` -> ``index_copy``), later uses of the
mutated tensor read the new value, and the buffers' and inputs' final
values become mutation outputs of the signature, as the retrace would have
made them.

:func:`functional_program` returns None (and the caller decomposes as
before) when that rewrite could change what the program computes: a
mutation through a view, a view of a tensor read after the tensor was
mutated, a mutated parameter, or an op no converter knows.
"""

from __future__ import annotations

import operator
from typing import Dict, List, Optional

import torch
import torch.fx as fx
from torch.export.graph_signature import ExportGraphSignature, InputKind, OutputKind, OutputSpec, TensorArgument

from .converters import converter_of
from .converters.registry import COMPLEX_CONVERTERS, canonical

aten = torch.ops.aten


class _Refuse(Exception):
    """The program needs torch's own functionalization."""


def _mutated_arg(target) -> Optional[int]:
    """The index of the argument an in-place op writes (only ``self`` is handled), else None."""
    schema = target._schema
    if not schema.is_mutable:
        return None
    written = [i for i, a in enumerate(schema.arguments) if a.alias_info is not None and a.alias_info.is_write]
    if written != [0]:
        raise _Refuse(f"{target} writes {written}")
    return 0


def _functional(target):
    """``aten.foo_.overload`` -> ``aten.foo.overload`` (a converted, non-mutating op), or refuse."""
    name = target._schema.name.split("::")[-1]
    if not name.endswith("_") or name.endswith("__"):
        raise _Refuse(f"{target} has no functional variant")
    packet = getattr(aten, name[:-1], None)
    op = getattr(packet, target._overloadname, None) if packet is not None else None
    if op is None or op._schema.is_mutable or converter_of(op) is None:
        raise _Refuse(f"{target} has no converted functional variant")
    return op


def _is_view(target) -> bool:
    """Whether the op's result may share its input's memory (a view, ``reshape``, ``to``...)."""
    if target is operator.getitem:
        return True
    schema = getattr(target, "_schema", None)
    return schema is not None and any(r.alias_info is not None for r in schema.returns)


def _handled(node: fx.Node, ignored) -> bool:
    """Whether ``node`` is converted (or evaluated as a size)."""
    t = node.target
    val = node.meta.get("val")
    if isinstance(val, torch.SymBool):
        return False
    if converter_of(t) is not None or canonical(t) in COMPLEX_CONVERTERS or t in ignored or t is operator.getitem:
        return True
    return isinstance(val, (int, torch.SymInt)) and not isinstance(val, bool)


def functional_program(ep: torch.export.ExportedProgram) -> Optional[torch.export.ExportedProgram]:
    """``ep`` in functional form with its ops as they are (see the module's
    doc), or None when it needs ``run_decompositions``."""
    try:
        return _rewrite(ep)
    except _Refuse:
        return None


def _rewrite(ep):
    from .convert import IGNORED

    sig = ep.graph_signature
    old = ep.graph
    kinds = {s.arg.name: s for s in sig.input_specs if hasattr(s.arg, "name")}
    order = {n: k for k, n in enumerate(old.nodes)}
    last_use = {n: max((order[u] for u in n.users), default=order[n]) for n in old.nodes}
    base: Dict[fx.Node, fx.Node] = {}  # node -> the tensor whose memory it may share
    views: Dict[fx.Node, List[fx.Node]] = {}  # base -> the views taken of it
    env: Dict[fx.Node, fx.Node] = {}  # old node -> new node (a mutated base: its latest value)
    mutated: Dict[fx.Node, fx.Node] = {}  # placeholder -> its final value (new graph)
    same: Dict[fx.Node, fx.Node] = {}  # an in-place op -> the tensor it wrote
    rewritten = False
    graph = fx.Graph()

    def arg(n):
        while n in same:  # (tracing reads the latest in-place result; an earlier one is the same tensor)
            n = same[n]
        return env[n]

    for node in old.nodes:
        if node.op == "placeholder":
            env[node] = graph.node_copy(node, arg)
            base[node] = node
            continue
        if node.op == "output":
            break
        if node.op != "call_function":
            if node.op != "get_attr":
                raise _Refuse(f"{node.op} node")
            env[node] = graph.node_copy(node, arg)
            base[node] = node
            continue
        t = node.target
        if not isinstance(t, torch._ops.OpOverload) and t is not operator.getitem:
            if not _handled(node, IGNORED):
                raise _Refuse(f"{t}")
            env[node] = graph.node_copy(node, arg)
            continue
        k = _mutated_arg(t) if isinstance(t, torch._ops.OpOverload) else None
        if k is None:
            if not _handled(node, IGNORED):
                raise _Refuse(f"no converter for {t}")
            env[node] = graph.node_copy(node, arg)
            src = node.args[0] if node.args else None
            if _is_view(t) and isinstance(src, fx.Node) and src in base:
                b = base[src]
                base[node] = b
                views.setdefault(b, []).append(node)
            else:
                base[node] = node
            continue
        # an in-place op: its functional variant, whose result is the tensor's new value
        dst = node.args[k]
        while dst in same:  # the result of an in-place op is the tensor it wrote
            dst = same[dst]
        if not isinstance(dst, fx.Node) or base.get(dst) is not dst:
            raise _Refuse(f"{node.name} writes through a view")
        if dst.op == "placeholder":
            spec = kinds.get(dst.name)
            if spec is None or spec.kind not in (InputKind.BUFFER, InputKind.USER_INPUT):
                raise _Refuse(f"{node.name} writes {dst.name}")
        elif dst.op != "call_function":
            raise _Refuse(f"{node.name} writes {dst.name}")
        rewritten = True
        here = order[node]
        for v in views.get(dst, ()):
            if last_use[v] > here:
                raise _Refuse(f"{v.name}, a view of {dst.name}, is read after {node.name} writes it")
        views[dst] = []
        fn = _functional(t)
        new = graph.create_node("call_function", fn, tuple(fx.map_arg(node.args, arg)),
                                dict(fx.map_arg(node.kwargs, arg)), name=fn._schema.name.split("::")[-1])
        new.meta = dict(node.meta)
        env[dst] = new
        env[node] = new
        base[node] = dst
        same[node] = dst
        if dst.op == "placeholder":
            mutated[dst] = new
    else:
        raise _Refuse("no output node")

    out_node = node
    if not rewritten:
        return ep
    specs = [s for s in sig.output_specs if s.kind is OutputKind.USER_OUTPUT]
    if len(specs) != len(sig.output_specs):
        raise _Refuse("the program already has mutation outputs")
    results = list(out_node.args[0])
    new_results, new_specs = [], []
    for ph, value in sorted(mutated.items(), key=lambda kv: order[kv[0]]):
        spec = kinds[ph.name]
        if spec.kind is InputKind.BUFFER:
            new_specs.append(OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(value.name), spec.target))
        else:
            new_specs.append(OutputSpec(OutputKind.USER_INPUT_MUTATION, TensorArgument(value.name), ph.name))
        new_results.append(value)
    for spec, r in zip(specs, results):
        mapped = fx.map_arg(r, arg)
        if isinstance(mapped, fx.Node) and isinstance(spec.arg, TensorArgument):
            spec = OutputSpec(spec.kind, TensorArgument(mapped.name), spec.target)
        new_specs.append(spec)
        new_results.append(mapped)
    out = graph.output(tuple(new_results))
    out.meta = dict(out_node.meta)
    new_sig = ExportGraphSignature(input_specs=list(sig.input_specs), output_specs=new_specs)
    return torch.export.ExportedProgram(
        root=ep.graph_module, graph=graph, graph_signature=new_sig, state_dict=ep.state_dict,
        range_constraints=ep.range_constraints, module_call_graph=ep.module_call_graph,
        example_inputs=ep.example_inputs, constants=ep.constants, verifiers=ep.verifiers)

