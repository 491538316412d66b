"""dyngraph.torch: run PyTorch programs (``torch.export``) on dyngraph.

::

    import torch, dyngraph.torch as dgt

    seq = torch.export.Dim("seq", min=1, max=512)
    run = dgt.compile(model, kwargs={"input_ids": ids}, dynamic_shapes={"input_ids": {1: seq}})
    out = run(input_ids=other_ids)      # any length the export allowed; same outputs as model(...)
    print(run.report())                 # what (if anything) runs in PyTorch, and why

The program is converted op by op as exported (in-place ops made
functional, see :mod:`dyngraph.torch.functional`; a program with ops no
converter takes is first decomposed to core ATen, keeping attention, linear,
norms whole) to a dyngraph graph whose dimensions are the export's size
symbols (``seq``, ``seq + 1``...), partitioned, and each supported partition
compiled once. Nodes without a dyngraph form run in
PyTorch between partitions. Buffers the program mutates (a static KV cache)
become STATE tensors updated in place; ``reset()`` restores them. A program
that converted whole can be saved (``save(path)``) and run by
``dyngraph.load`` without PyTorch.

Dimensions: dyngraph sizes are at least 1, so a torch ``Dim`` whose range
starts at 0 or 1 becomes a dimension with minimum 1.
"""

from __future__ import annotations

try:
    import torch
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("dyngraph.torch needs PyTorch: pip install 'dyngraph[torch]'") from e

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from torch.utils import _pytree as pytree

from ..engine import Engine
from ..errors import CompileError, ExecutionError, ShapeError
from ..passes import WEIGHT_TYPES
from ..stored_weight import StoredWeight
from .dtypes import from_numpy, to_numpy
from .export import decompose, decomposition_table, dim_names, export
from .fallback import DataAssertionError, DataSizeOutOfRange, format_report, resolve
from .functional import functional_program
from .convert import Fallback, ForceFallback, Converted, Converter, Ref, RunnerBuffer
from .runner import DgStep, PartitionFailure, build_graph, build_steps, symbol_env, symbol_sources, template_ids
from .saving import NotSavableError, savable_partition
from .symbols import SymbolTable

MAX_ATTEMPTS = 32


class CompiledProgram:
    """A torch.export program compiled on dyngraph: call it like the module."""

    def __init__(self, ep, converted: Converted, steps, owners, partitions, engine):
        self.exported_program = ep  # as converted (made functional, or decomposed)
        self.engine = engine
        self.partitions = partitions  # the dyngraph partitions, supported and not
        self._converted = converted
        self._steps = steps
        self._owners = owners
        spec = ep.call_spec
        self._in_spec, self._out_spec = spec.in_spec, spec.out_spec
        self._kw_keys = _kwarg_keys(self._in_spec)
        self._n_args = _n_positional(self._in_spec)
        self._simple = self._in_spec == pytree.tree_flatten((tuple(range(self._n_args)), {}))[1]
        self._inputs = converted.inputs
        self._consts = [(k, v) for k, v in enumerate(converted.input_values) if converted.inputs[k] is None]
        self._sym_sources = symbol_sources(converted)
        self._buffers = converted.buffers
        self._buffer_init = {tid: t.clone() for tid, t in converted.buffers.items()}
        self._constants = {}
        needed = set()
        for s in steps:
            if not isinstance(s, DgStep):
                template_ids(s.args, needed)
                template_ids(s.kwargs, needed)
        template_ids(converted.outputs, needed)
        for tid in needed:
            if tid in converted.torch_constants and tid not in converted.buffers:
                self._constants[tid] = converted.torch_constants[tid]
        # the export's conditions on sizes the ranges do not imply, over sizes the inputs give (checked
        # at each call of new sizes; none in a program exported with named Dims: torch keeps those as ranges)
        sourced = {src[0] for src in self._sym_sources}
        self._guards = [g for g in converted.guards if g.symbols() <= sourced]
        self._guards_passed: set = set()
        self._stateless = not (self._buffers or owners or converted.input_mutations)
        self._eager_module = None  # ep.module(), for a call whose data gives a size of 0
        self._fast = self._fast_plan()

    # ------------------------------------------------------------------ calling
    def _flatten(self, args, kwargs) -> list:
        if not kwargs and self._n_args == len(args) and not self._kw_keys and self._simple:
            return list(args)
        if kwargs and self._kw_keys is not None:
            extra = [k for k in kwargs if k not in self._kw_keys]
            if extra:
                raise ExecutionError(f"unexpected keyword arguments {extra}; the program takes {list(self._kw_keys)}")
            try:
                kwargs = {k: kwargs[k] for k in self._kw_keys}
            except KeyError as e:
                raise ExecutionError(f"missing keyword argument {e.args[0]!r}") from None
        flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        if spec != self._in_spec:
            raise ExecutionError(f"the inputs do not have the structure the program was exported with:\n"
                                 f"got {spec}\nexpected {self._in_spec}")
        return flat

    def _fast_plan(self):
        """One dyngraph partition fed by the inputs, producing every output: the
        call is one backend run, with numpy views of the tensors in and out."""
        lw = self._converted
        if (len(self._steps) != 1 or not isinstance(self._steps[0], DgStep) or self._buffers or lw.input_mutations
                or lw.value_asserts):
            return None
        step = self._steps[0]
        if step.symbols:  # sizes passed as values: the general path evaluates them
            return None
        pos = {tid: k for k, tid in enumerate(self._inputs) if tid is not None}
        if not all(i in pos for i in step.in_ids):
            return None
        out_pos = {tid: j for j, tid in enumerate(step.out_ids)}
        outs = []
        for o in lw.outputs:
            if not (isinstance(o, Ref) and o.kind == Ref.TENSOR and o.value in out_pos):
                return None
            outs.append(out_pos[o.value])
        in_pos = [pos[i] for i in step.in_ids]
        run, np_dtypes, t_dtypes = step.run, step.np_dtypes, step.torch_dtypes
        plain = not any(dt is torch.bfloat16 for dt in t_dtypes)
        from_np = torch.from_numpy
        unflatten = _unflattener(self._out_spec)
        n, simple, flatten, consts, check = self._n_args, self._simple, self._flatten, self._consts, self._check_constants
        # (guards the partition checks itself at every call are not checked here again)
        guarded = any(all(g is not h for h in step.guards) for g in self._guards)
        check_guards = self._check_guards

        def call(args, kwargs):
            flat = args if simple and not kwargs and len(args) == n else flatten(args, kwargs)
            if consts:
                check(flat)
            if guarded:
                check_guards(flat)
            res = run([to_numpy(flat[k]) for k in in_pos], np_dtypes)
            if plain:
                return unflatten([from_np(res[j]) for j in outs])
            return unflatten([from_numpy(res[j], t_dtypes[j]) for j in outs])

        return call

    def __call__(self, *args, **kwargs):
        if self._fast is not None:
            return self._fast(args, kwargs)
        return self._call_general(self._flatten(args, kwargs))

    def _check_guards(self, flat) -> None:
        """The conditions on sizes torch.export traced the program under, beyond the symbols'
        ranges (a chunked scan exported as one chunk, a branch taken on a size): sizes that fail
        one are refused, as ep.module() refuses them, rather than computed on the traced branch."""
        try:
            env = symbol_env(self._sym_sources, flat)
        except (AttributeError, TypeError, IndexError):  # not tensors: the run says which input is wrong
            return
        key = tuple(env.values())
        if key in self._guards_passed:
            return
        failed = [g for g in self._guards if not g.holds(env)]
        if failed:
            sizes = ", ".join(f"{s.name} = {v}" for s, v in sorted(env.items(), key=lambda kv: kv[0].name))
            raise ShapeError(f"these sizes ({sizes}) fail a condition torch.export traced the program under: "
                             f"{min(failed, key=lambda g: len(str(g)))}; torch's ep.module() refuses them too. "
                             f"Export it with an example of these sizes, or with a Dim range torch.export keeps")
        if len(self._guards_passed) >= 4096:
            self._guards_passed.clear()
        self._guards_passed.add(key)

    def _run_eager(self, flat):
        """This call in PyTorch: the exported program, for sizes dyngraph does not run."""
        if self._eager_module is None:
            self._eager_module = self.exported_program.module()
        args, kwargs = pytree.tree_unflatten(list(flat), self._in_spec)
        with torch.no_grad():
            return self._eager_module(*args, **kwargs)

    def _check_constants(self, flat) -> None:
        for k, v in self._consts:
            if flat[k] is not v and flat[k] != v:
                raise ExecutionError(f"input {k} was {v!r} when the program was exported, got {flat[k]!r}")

    def _call_general(self, flat):
        self._check_constants(flat)
        env: Dict[int, Any] = dict(self._constants)
        for k, tid in enumerate(self._inputs):
            if tid is not None:
                t = flat[k]
                if not isinstance(t, torch.Tensor):
                    raise ExecutionError(f"input {k} must be a tensor, got {type(t).__name__}")
                env[tid] = t
        if self._guards:
            self._check_guards(flat)
        env.update(self._buffers)
        cache = {}

        def symenv():
            if "env" not in cache:
                cache["env"] = symbol_env(self._sym_sources, flat)
            return cache["env"]

        try:
            for step in self._steps:
                step(env, symenv)
        except (TypeError, RuntimeError, AttributeError) as e:
            raise ExecutionError(f"{type(e).__name__}: {e}") from None
        except DataSizeOutOfRange as e:
            if e.value < 1 and self._stateless:  # (an empty selection: dyngraph sizes are at least 1)
                return self._run_eager(flat)
            raise
        for tid, message in self._converted.value_asserts:  # (before outputs, inputs and runner buffers are written)
            if not bool(env[tid]):
                raise DataAssertionError(message)
        res = [resolve(o, env, symenv) for o in self._converted.outputs]
        for k, tid in self._converted.input_mutations:
            flat[k].copy_(env[tid])
        for _, bid, vid in self._converted.buffer_writes:
            self._buffers[bid].copy_(env[vid])
        return pytree.tree_unflatten(res, self._out_spec)

    # ------------------------------------------------------------------- state
    def reset(self) -> None:
        """Mutated buffers (a KV cache) back to their values at compile."""
        seen = set()
        for cp, _ in self._owners.values():
            if id(cp) not in seen:
                seen.add(id(cp))
                cp.reset_state()
        for tid, t in self._buffers.items():
            t.copy_(self._buffer_init[tid])

    def buffer(self, name: str) -> torch.Tensor:
        """The current value of a mutated buffer (a copy), by its name in the module."""
        if name in self._owners:
            cp, tid = self._owners[name]
            return from_numpy(cp.read_state(tid), self._converted.torch_dtypes[tid])
        for bname, bid, _ in self._converted.buffer_writes:
            if bname == name:
                return self._buffers[bid].clone()
        raise KeyError(f"{name!r} is not a buffer the program mutates")

    # ------------------------------------------------------------------ saving
    def save(self, path) -> None:
        """Write the program to one file that ``dyngraph.load(path)`` runs
        without PyTorch (or the model): a ``CompiledPartition`` called on numpy
        arrays, the program's flat tensor inputs in order (non-tensor inputs
        keep their exported values), returning its flat outputs in order.
        Mutated buffers (a KV cache) are its state, saved at their initial
        values. Only a program that converted whole can be saved: else
        :class:`NotSavableError` says which nodes run in PyTorch."""
        names = _input_names(self.exported_program, len(self._inputs))
        savable_partition(self._converted, self._steps, names).save(path)

    # --------------------------------------------------------------- reporting
    @property
    def fallbacks(self) -> List[Fallback]:
        """The nodes that run in PyTorch: (node, target, reason)."""
        return list(self._converted.fallbacks)

    @property
    def compiled_partitions(self):
        return [s.cp for s in self._steps if isinstance(s, DgStep)]

    @property
    def dims(self) -> Dict[str, Any]:
        """The dyngraph dimensions (by name) the program's sizes are expressions of."""
        return {d.name: d for d in self._converted.symbols.dims.values()}

    def cache_info(self):
        return [cp.cache_info() for cp in self.compiled_partitions]

    def report(self) -> str:
        n_ops = sum(len(s.op_ids) for s in self._steps if isinstance(s, DgStep))
        return format_report(self._converted.fallbacks, n_ops, len(self.compiled_partitions))

    def __repr__(self) -> str:
        return f"CompiledProgram({len(self.compiled_partitions)} dyngraph partition(s), {len(self.fallbacks)} node(s) in PyTorch)"


def _unflattener(spec):
    """A function rebuilding the output structure from the flat outputs (the
    common shapes, a tensor or a tuple of tensors, without pytree)."""
    if spec.is_leaf():
        return lambda res: res[0]
    if spec.type is tuple and all(c.is_leaf() for c in spec.children()):
        return tuple
    return lambda res: pytree.tree_unflatten(res, spec)


def _input_names(ep, n: int) -> List[str]:
    """Names of the flat user inputs (their placeholders')."""
    names = [getattr(s.arg, "name", None) for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    return [names[k] if k < len(names) and names[k] else f"input {k}" for k in range(n)]


def _kwarg_keys(in_spec) -> Optional[Tuple[str, ...]]:
    try:
        kw = in_spec.child(1)
        return tuple(kw.context)
    except (AttributeError, IndexError, TypeError):
        return None


def _n_positional(in_spec) -> int:
    try:
        return in_spec.child(0).num_children
    except (AttributeError, IndexError):
        return 0


def _engine(engine) -> Engine:
    if engine is None:
        return Engine.shared()
    if isinstance(engine, Engine):
        return engine
    if isinstance(engine, int) and not isinstance(engine, bool):
        return Engine.shared(engine)
    raise CompileError(f"engine must be a dyngraph Engine or a thread count, got {engine!r}")


def _names(ep, user_names: Dict[Tuple[str, int], str]) -> dict:
    """sympy symbol -> a readable name: the torch Dim's, else '<input>.dim<d>'."""
    names = {}
    sig = ep.graph_signature
    user = set(sig.user_inputs)
    for node in ep.graph.nodes:
        if node.op != "placeholder" or node.name not in user:
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for d, s in enumerate(val.shape):
            if isinstance(s, torch.SymInt) and s.node.expr.is_Symbol and s.node.expr not in names:
                names[s.node.expr] = user_names.get((node.name, d)) or f"{node.name}.dim{d}"
    return names


def compile(
    model: Union[torch.nn.Module, "torch.export.ExportedProgram"],
    args: Sequence = (),
    kwargs: Optional[dict] = None,
    *,
    dynamic_shapes: Any = None,
    weight_type: Union[str, Mapping[str, str]] = "f32",
    engine: Union[Engine, int, None] = None,
    cache_capacity: int = 16,
    strict: bool = False,
    weights: Optional[Mapping[str, "StoredWeight"]] = None,
) -> CompiledProgram:
    """Compile a ``torch.export`` program (or export ``model`` with ``args``,
    ``kwargs`` and ``dynamic_shapes`` first) into a callable taking and
    returning torch tensors, like the module.

    ``weight_type``: storage of matmul and embedding weights ("f32", "f16",
    "bf16", "q8_0", "q4_0", "q4_1"): one type for all, or a mapping from glob
    patterns on parameter names to types, where the first pattern that matches
    a parameter decides (``{"*.mlp.*": "q4_0", "*": "q8_0"}``); a parameter no
    pattern matches stays f32, a pattern that matches nothing is an error.
    ``engine``: a dyngraph Engine, or a thread count for the process's shared CPU
    engine of that many threads (``Engine.shared``; the default: of
    ``default_num_threads()``). ``weights``: parameters
    given already in a storage type, by name (``gguf.gguf_weights`` reads
    them from a GGUF file), used as they are.
    ``cache_capacity``: ggml graphs kept per compiled partition (one per
    distinct input shape).
    """
    if isinstance(model, torch.export.ExportedProgram):
        ep, names = model, {}
    else:
        ep = export(model, args, kwargs, dynamic_shapes, strict=strict)
        names = dim_names(model, args, kwargs, dynamic_shapes)
    eng = _engine(engine)
    options = {"cache_capacity": cache_capacity}
    if isinstance(weight_type, Mapping):
        for pat, wt in weight_type.items():
            if not isinstance(pat, str) or wt not in WEIGHT_TYPES:
                raise CompileError(f"weight_type maps parameter name patterns to one of {list(WEIGHT_TYPES)}, "
                                   f"got {pat!r}: {wt!r}")
        options["weight_type"] = dict(weight_type)
    elif weight_type != "f32":
        options["weight_type"] = weight_type
    if weights:
        options["weights"] = _checked_weights(ep, weights)
    program = functional_program(ep)
    if program is not None:
        try:
            return _convert(program, names, eng, options, whole=True)
        except _NotWhole:
            pass  # torch's decomposition may give converters what they take
    return _convert(decompose(ep), names, eng, options, whole=False)


def _checked_weights(ep, weights: Mapping[str, StoredWeight]) -> Dict[str, StoredWeight]:
    """``weights`` for parameters of ``ep`` (a tied parameter's other names are
    let through when one of its names is a parameter)."""
    params = set(ep.graph_signature.parameters)
    for name, w in weights.items():
        if not isinstance(w, StoredWeight):
            raise CompileError(f"weights[{name!r}] must be a dyngraph.StoredWeight, got {type(w).__name__}")
    used = {id(w) for n, w in weights.items() if n in params}
    unknown = sorted(n for n, w in weights.items() if n not in params and id(w) not in used)
    if unknown:
        raise CompileError(f"weights given for {unknown[:4]}{' ...' if len(unknown) > 4 else ''}, which are not "
                           f"parameters of the program (names like {sorted(params)[:3]})")
    return dict(weights)


class _NotWhole(Exception):
    """The program as exported does not convert whole: it is decomposed first."""


def _convert(ep, names, eng, options, whole: bool) -> CompiledProgram:
    """Lower, partition and compile ``ep``. ``whole``: every node must run in
    dyngraph (else _NotWhole); otherwise the nodes that cannot run in PyTorch."""
    try:
        symbols = SymbolTable(ep.range_constraints, _names(ep, names))
    except CompileError:
        if whole:
            raise _NotWhole() from None
        raise
    forced: dict = {}
    runner_buffers: set = set()
    for _ in range(MAX_ATTEMPTS):
        try:
            converted = Converter(ep, symbols, forced, runner_buffers).run()
            if whole and converted.fallbacks:
                raise _NotWhole()
            graph = build_graph(converted)
            steps, owners, parts = build_steps(converted, graph, eng, options, converted.guards)
        except ForceFallback as e:
            if whole:
                raise _NotWhole() from None
            forced[e.node] = e.reason
            continue
        except RunnerBuffer as e:
            runner_buffers.add(e.name)
            continue
        except PartitionFailure as e:
            new = {n: r for n, r in e.reasons.items() if n not in forced}
            if whole:
                raise _NotWhole() from None
            if not new:
                raise CompileError(str(e)) from None
            forced.update(new)
            continue
        except CompileError:
            if whole:
                raise _NotWhole() from None
            raise
        return CompiledProgram(ep, converted, steps, owners, parts, eng)
    raise CompileError(f"could not partition the program after {MAX_ATTEMPTS} attempts")

__all__ = ["CompiledProgram", "DataAssertionError", "DataSizeOutOfRange", "Fallback", "NotSavableError", "compile",
           "decomposition_table", "export"]

