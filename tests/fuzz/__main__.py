"""python -m tests.fuzz: fuzz dyngraph artifacts (see tests/fuzz/README.md).

    python -m tests.fuzz --seconds 120            # CI's short run
    python -m tests.fuzz --long                   # >= 100,000 inputs, prints a summary line
    python -m tests.fuzz --seconds 600 --seed 7 --jobs 2 --kinds llama shape
"""

import argparse
import os
import sys

from .fuzzer import DEFAULT_CRASH_DIR, ROOT, run


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=None, help="stop after this long")
    p.add_argument("--inputs", type=int, default=None, help="stop after this many inputs")
    p.add_argument("--long", action="store_true", help="the long mode: 100,000 inputs (unless --inputs says otherwise)")
    p.add_argument("--seed", type=int, default=None, help="random seed (a run is repeatable given the seed and --jobs 1)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--kinds", nargs="*", default=None, help="artifact kinds (default: all)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds one input may take before it is a hang")
    p.add_argument("--mem-mb", type=int, default=4096, help="memory limit of a worker (address space, or RSS under ASan)")
    p.add_argument("--raw-frac", type=float, default=0.3, help="share of inputs run through the C++ constructor directly")
    p.add_argument("--crash-dir", default=DEFAULT_CRASH_DIR, help="where findings are saved ('' to save nothing)")
    p.add_argument("--keep-per-class", type=int, default=2, help="inputs saved per finding class")
    p.add_argument("--seeds-dir", default=os.path.join(ROOT, "build", "fuzz-seeds"))
    p.add_argument("--reuse-seeds", action="store_true", help="do not regenerate the seed artifacts")
    p.add_argument("--python", default=None, help="interpreter of the workers (default: this one)")
    p.add_argument("--fail-on", choices=["any", "new", "none"], default="new",
                   help="exit 1 on any finding, on a class not yet in --crash-dir (default), or never")
    p.add_argument("--report-every", type=float, default=30.0, help="seconds between progress lines")
    args = p.parse_args(argv)
    if args.long and args.inputs is None:
        args.inputs = 100_000
    if args.seconds is None and args.inputs is None:
        args.seconds = 120.0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
