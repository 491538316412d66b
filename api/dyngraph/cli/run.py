"""``dyngraph run``: benchdnn's ``--graph`` driver for dyngraph.

Options are read in order, as benchdnn reads them, so the lines of its batch
files run as they are: each ``--case=FILE`` (or a bare path) runs the case
with the options given so far; ``--reset`` forgets them; ``--batch=FILE``
reads more options from a file (``#`` starts a comment). A comma separates
variants (``--op-kind=0:Abs,0:Exp`` runs the case twice).

Each run: import the case (with benchdnn's rewrites), compile its partitions
once, fill its inputs (:mod:`dyngraph.onednn.fill`), execute at each binding
of ``--shapes`` (default: the file's own sizes) and compare every output with
the numpy reference. One line per run::

    PASS: op/f32/add.json: 1 binding, worst error 0 (tolerance 0.0001) in output 2 (f32)
    UNSUPPORTED: op/f32/conv_2d.json: dyngraph has no op kind Convolution

Exit status (:mod:`dyngraph.cli.exitcodes`): 0 every run passed; 1 an
output differs from the reference; 2 a usage error (an unknown option, a
malformed option value, a case or batch file that does not exist); 4 a case
is malformed or raised another typed error; 3 a case is unsupported (and
nothing failed). A case that fails in any way is counted and the runs go
on: the status is that of the worst case (1, then 2, 4, 3).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..engine import Engine
from ..errors import DyngraphError, UnsupportedError
from ..onednn.options import OptionError, Overrides, parse_bindings, parse_dt, parse_dynamic, parse_in_shapes
from ..onednn.options import parse_mb, parse_op_attrs, parse_op_kind, parse_tensor_property, variants
from .exitcodes import EXIT_ERROR, EXIT_FAIL, EXIT_PASS, EXIT_UNSUPPORTED, EXIT_USAGE, UsageError, exit_code, need_file

USAGE = """usage: dyngraph run [options] CASE.json ...

  --case=FILE                 run a case (a bare path does the same)
  --batch=FILE                read options and cases from a benchdnn batch file
  --reset                     forget the options given so far
benchdnn's rewrites (a comma separates variants, '+' joins items):
  --in-shapes=ID:SHAPE[*STRIDES][+...]   --op-attrs=ID:NAME:VALUE[*NAME:VALUE][+...]
  --dt=DT | --dt=ID:DT[+...]             --op-kind=ID:KIND[+...] (undef removes the op)
  --mb=N                                 --tensor-property=ID:PROPERTY[+...]
  --expected-n-partitions=N              (accepted; dyngraph partitions its own way)
  --attr-fpmath=MODE[:APPLY_TO_INT]      (accepted; dyngraph computes f32 as f32, as every mode allows)
dyngraph's:
  --dynamic=ID:AXIS[:NAME][+...]  make dimension AXIS of graph input ID dynamic
  --shapes=NAME=V[,NAME=V][+...]  bindings to run through one compiled partition
  --seed=N --threads=N --max-gib=G --no-decompose --json -v
"""

_REWRITES = ("--in-shapes", "--op-attrs", "--dt", "--op-kind", "--mb", "--tensor-property", "--attr-fpmath")
FPMATH = ("strict", "bf16", "f16", "tf32", "any")
_OPTIONS = _REWRITES + ("--dynamic", "--shapes", "--expected-n-partitions", "--seed", "--threads", "--max-gib",
                        "--case", "--batch", "--mode", "--engine")
_FLAGS = ("--reset", "--no-decompose", "--json", "-v", "--verbose")


@dataclass
class Settings:
    seed: int = 0
    threads: int = 1
    max_bytes: int = 4 << 30
    decompose: bool = True
    json: bool = False
    verbose: bool = False


@dataclass
class State:
    values: Dict[str, str] = field(default_factory=dict)


@dataclass
class Tally:
    counts: Dict[str, int] = field(default_factory=lambda: {"pass": 0, "fail": 0, "unsupported": 0, "error": 0,
                                                            "usage": 0})

    def exit_code(self) -> int:
        if self.counts["fail"]:
            return EXIT_FAIL
        if self.counts["usage"]:
            return EXIT_USAGE
        if self.counts["error"]:
            return EXIT_ERROR
        if self.counts["unsupported"]:
            return EXIT_UNSUPPORTED
        return EXIT_PASS


def tokenize_batch(path: str) -> List[str]:
    """A batch file's options: whitespace-separated, ``#`` to the end of a
    line is a comment, a line ending in ``\\`` continues on the next one
    (joined without the space, as benchdnn joins it; comment lines between
    are skipped)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise UsageError(f"cannot read batch file {path}: {e.strerror or e}") from None
    text, pending = [], ""
    for line in lines:
        if line.lstrip().startswith("#"):
            continue  # a comment line, also inside a continued line (oneDNN's batch files comment out parts so)
        line = line.split("#", 1)[0].rstrip()
        if pending:
            line = pending + line.lstrip()
            pending = ""
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        text.append(line)
    text.append(pending)
    return " ".join(text).split()


def _resolve(path: str, bases: List[str]) -> str:
    if os.path.exists(path) or os.path.isabs(path):
        return path
    for base in bases:
        d = os.path.abspath(base)
        while True:
            cand = os.path.join(d, path)
            if os.path.exists(cand):
                return cand
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    return path


def overrides_for(values: Dict[str, str], choice: Dict[str, str]) -> Overrides:
    ov = Overrides()
    if choice.get("--in-shapes"):
        ov.in_shapes = parse_in_shapes(choice["--in-shapes"])
    if choice.get("--op-attrs"):
        ov.op_attrs = parse_op_attrs(choice["--op-attrs"])
    if choice.get("--dt"):
        ov.dt = parse_dt(choice["--dt"])
    if choice.get("--op-kind"):
        ov.op_kind = parse_op_kind(choice["--op-kind"])
    if choice.get("--mb"):
        ov.mb = parse_mb(choice["--mb"])
    if choice.get("--tensor-property"):
        ov.tensor_property = parse_tensor_property(choice["--tensor-property"])
    if choice.get("--attr-fpmath"):
        # the precision the library may compute f32 in: dyngraph computes f32 as f32, which every mode allows
        mode = choice["--attr-fpmath"].split(":")[0]
        if mode not in FPMATH:
            raise OptionError(f"--attr-fpmath: {mode!r} is not one of {', '.join(FPMATH)}")
    if values.get("--dynamic"):
        ov.dynamic = parse_dynamic(values["--dynamic"])
    return ov


def run_one(case: str, shown: str, values: Dict[str, str], choice: Dict[str, str], settings: Settings,
            tally: Tally, out=None) -> str:
    from ..onednn.reader import import_graph
    from ..onednn.runner import run_case

    out = out or sys.stdout
    opts = "".join(f" {k}={v}" for k, v in choice.items() if v) + (
        f" --dynamic={values['--dynamic']}" if values.get("--dynamic") else "")
    label = f"{shown}{opts}"
    record = {"case": shown, "options": opts.strip()}
    try:
        need_file(case, "case")
        ov = overrides_for(values, choice)
        bindings = [parse_bindings(b) for b in values["--shapes"].split("+") if b] if values.get("--shapes") else []
        imp = import_graph(case, ov, settings.decompose)
        res = run_case(imp, bindings, engine=Engine(num_threads=settings.threads), seed=settings.seed,
                       max_bytes=settings.max_bytes)
        status, detail, features = res.status, res.message, res.features
        if status in ("pass", "fail"):
            n = len(res.runs)
            detail = f"{n} binding{'s' if n != 1 else ''}, {res.graphs_built} graph{'s' if res.graphs_built != 1 else ''} built, {detail}"
            record.update(bindings=[r.binding for r in res.runs], graphs_built=res.graphs_built,
                          outputs=[{"binding": r.binding, "tensor": o.tensor, "dtype": o.dtype, "shape": list(o.shape),
                                    "ok": o.comparison.ok, "error": o.comparison.error, "tolerance": o.comparison.tol}
                                   for r in res.runs for o in r.outputs])
    except UnsupportedError as e:
        status, detail, features = "unsupported", str(e), e.features
    except (DyngraphError, UsageError) as e:
        status = "usage" if exit_code(e) == EXIT_USAGE else "error"
        detail, features = f"{type(e).__name__}: {e}", ()
    except (MemoryError, RecursionError, ArithmeticError, TypeError, ValueError, LookupError, AttributeError) as e:
        # a bug of dyngraph's, not of the case: counted, and the other cases still run
        status, detail, features = "error", f"internal error (please report it) {type(e).__name__}: {e}", ()
    tally.counts[status] += 1
    record.update(status=status, detail=detail, features=list(features))
    if settings.json:
        print(json.dumps(record), file=out)
    else:
        print(f"{status.upper()}: {label}: {detail}", file=out)
        if settings.verbose and status in ("pass", "fail"):
            for o in record.get("outputs", []):
                print(f"    {o['binding'] or ''} output {o['tensor']} {o['dtype']} {o['shape']}: "
                      f"error {o['error']:.3g} (tolerance {o['tolerance']:.3g}) {'ok' if o['ok'] else 'FAIL'}", file=out)
    out.flush()
    return status


def process(tokens: List[str], settings: Settings, tally: Tally, bases: List[str], values: Optional[Dict] = None,
            depth: int = 0) -> None:
    if depth > 16:
        raise UsageError("--batch files nest too deeply")
    values = values if values is not None else {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok in _FLAGS:
            if tok == "--reset":
                values.clear()
            elif tok == "--no-decompose":
                settings.decompose = False
            elif tok == "--json":
                settings.json = True
            else:
                settings.verbose = True
            continue
        if tok.startswith("-"):
            name, eq, value = tok.partition("=")
            if name not in _OPTIONS:
                raise UsageError(f"unknown option {tok!r}")
            if not eq:
                if i >= len(tokens):
                    raise UsageError(f"{name} needs a value")
                value = tokens[i]
                i += 1
            if name == "--batch":
                path = need_file(_resolve(value, bases), "batch file")
                process(tokenize_batch(path), settings, tally, [os.path.dirname(path)] + bases, values, depth + 1)
            elif name == "--case":
                run_variants(value, values, settings, tally, bases)
            elif name == "--seed":
                settings.seed = _number(value, name, int)
            elif name == "--threads":
                settings.threads = max(1, _number(value, name, int))
            elif name == "--max-gib":
                settings.max_bytes = int(_number(value, name, float) * 2**30)
            elif name == "--engine":
                if value != "cpu":
                    raise UsageError(f"--engine={value}: dyngraph runs on the CPU")
            elif name == "--mode":
                pass  # benchdnn's correctness / performance modes: dyngraph always checks correctness
            else:
                _check_option(name, value)
                values[name] = value
            continue
        run_variants(tok, values, settings, tally, bases)


def _number(text: str, name: str, kind):
    try:
        if len(text) > 40:
            raise ValueError(text)
        v = kind(text)
    except ValueError:
        raise UsageError(f"{name}={text[:40]}: not a number") from None
    if kind is float and not 0 < v < 2**40:
        raise UsageError(f"{name}={text}: not a positive size")
    return v


_PARSERS = {"--in-shapes": parse_in_shapes, "--op-attrs": parse_op_attrs, "--dt": parse_dt, "--op-kind": parse_op_kind,
            "--mb": parse_mb, "--tensor-property": parse_tensor_property, "--dynamic": parse_dynamic,
            "--shapes": lambda v: [parse_bindings(b) for b in v.split("+") if b],
            "--expected-n-partitions": lambda v: v and parse_mb(v)}


def _check_option(name: str, value: str) -> None:
    """A malformed option value is a usage error when it is read, not a failure of each case it would apply to."""
    parse = _PARSERS.get(name)
    try:
        for v in (variants(value) if name in _REWRITES else [value]):
            if v and parse is not None:
                parse(v)
            elif v and name == "--attr-fpmath" and v.split(":")[0] not in FPMATH:
                raise OptionError(f"--attr-fpmath: {v.split(':')[0]!r} is not one of {', '.join(FPMATH)}")
    except OptionError as e:
        raise UsageError(str(e)) from None


def run_variants(case: str, values: Dict[str, str], settings: Settings, tally: Tally, bases: List[str]) -> None:
    path = _resolve(case, bases)
    axes = [(k, variants(values.get(k))) for k in _REWRITES]
    for combo in itertools.product(*[v for _, v in axes]):
        run_one(path, case, values, {k: v for (k, _), v in zip(axes, combo)}, settings, tally)


def main(argv: List[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return EXIT_PASS if argv else EXIT_USAGE
    settings, tally = Settings(), Tally()
    try:
        process(argv, settings, tally, [os.getcwd()])
    except (UsageError, OptionError) as e:
        print(f"dyngraph run: {e}\n{USAGE}", file=sys.stderr)
        return EXIT_USAGE
    total = sum(tally.counts.values())
    if total == 0:
        print(f"dyngraph run: no case given\n{USAGE}", file=sys.stderr)
        return EXIT_USAGE
    if total > 1 and not settings.json:
        c = tally.counts
        print(f"tests: {total} passed: {c['pass']} failed: {c['fail']} unsupported: {c['unsupported']} "
              f"errors: {c['error']}" + (f" usage errors: {c['usage']}" if c["usage"] else ""))
    return tally.exit_code()
