"""Saving a compiled program as one dyngraph artifact (no PyTorch to run it).

A program that converted whole (one dyngraph partition, nothing in PyTorch,
its mutated buffers held as dyngraph state) is its compiled partition: the
partition takes the program's flat tensor inputs and returns its flat
outputs in the program's order, so ``CompiledPartition.save`` writes all of
it and ``dyngraph.load`` runs it on numpy arrays in another process.
"""

from __future__ import annotations

from typing import List

from ..errors import CompileError
from .convert import Converted, Ref


class NotSavableError(CompileError):
    """The program does not run as one dyngraph partition, so it cannot be
    saved as one: ``reasons`` says why (which nodes run in PyTorch...)."""

    def __init__(self, reasons: List[str]):
        super().__init__("the program cannot be saved as one dyngraph artifact: " + "; ".join(reasons))
        self.reasons = reasons


def savable_partition(converted: Converted, steps, input_names: List[str]):
    """The compiled partition that is the whole program, or NotSavableError."""
    from .runner import DgStep

    reasons = []
    if converted.fallbacks:
        nodes = ", ".join(str(f) for f in converted.fallbacks)
        reasons.append(f"{len(converted.fallbacks)} node(s) run in PyTorch: {nodes}")
    dg_steps = [s for s in steps if isinstance(s, DgStep)]
    if len(dg_steps) != 1 and not converted.fallbacks:
        reasons.append(f"it has {len(dg_steps)} dyngraph partitions (one is saved)")
    if converted.buffer_writes:
        names = ", ".join(name for name, _, _ in converted.buffer_writes)
        reasons.append(f"buffers the runner keeps in PyTorch: {names}")
    if converted.input_mutations:
        ks = ", ".join(input_names[k] for k, _ in converted.input_mutations)
        reasons.append(f"it writes its inputs in place: {ks}")
    if reasons:
        raise NotSavableError(reasons)
    (step,) = dg_steps
    want_in = [tid for tid in converted.inputs if tid is not None]
    if step.in_ids != want_in:
        unused = [input_names[k] for k, tid in enumerate(converted.inputs) if tid is not None and tid not in step.in_ids]
        why = f"inputs not used by the program: {', '.join(unused)}" if unused else "its inputs are not the program's"
        reasons.append(why)
    if step.symbols:
        reasons.append(f"it reads sizes no input of its own gives ({', '.join(s.name for s in step.symbols)})")
    for j, o in enumerate(converted.outputs):
        if not (isinstance(o, Ref) and o.kind == Ref.TENSOR):
            reasons.append(f"output {j} is not a computed tensor ({o!r})")
    want_out = [o.value for o in converted.outputs if isinstance(o, Ref) and o.kind == Ref.TENSOR]
    if not reasons and step.out_ids != want_out:
        reasons.append("its outputs are not the partition's (an output repeated, or an input returned as is)")
    if reasons:
        raise NotSavableError(reasons)
    return step.cp
