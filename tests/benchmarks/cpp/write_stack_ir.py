"""Write the decoder stack of tests/benchmarks/stack.py, compiled, to one IR
file (with its weights) for the C++ rebuild benchmark.

    python tests/benchmarks/cpp/write_stack_ir.py /tmp/stack.dgir
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
if os.environ.get("DYNGRAPH_DEV") == "1":
    sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "api"))

import dyngraph as dg  # noqa: E402
from stack import build_stack  # noqa: E402


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cp = build_stack().compile(dg.Engine(dg.Engine.CPU, num_threads=1))
    cp.save(sys.argv[1])
    print(f"wrote {sys.argv[1]} ({os.path.getsize(sys.argv[1]) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
