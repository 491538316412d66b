"""A MatMul with 4 inputs in a loaded file: the op's arity is not checked, the
extra (bias-like) input is dropped and the result is silently different."""
# fails-in: asan
# reason: op arity not checked against the op schema at load (a MatMul takes 2 or 3 inputs)
from tests.fuzz.reproducers._common import compiled, expect_typed, load, model_of, op
from tests.fuzz.seeds import mlp

cp, steps = compiled(mlp)
m = model_of(cp)
mm = op(m, "MatMul")
mm.inputs = mm.inputs + [mm.inputs[1], mm.inputs[1]]
expect_typed(lambda: load(m), "a MatMul with 4 inputs loaded")
