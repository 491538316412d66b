"""The fuzzer's parent process: generates inputs, feeds persistent workers,
and catches what kills them.

It never imports dyngraph: a worker loads the library, runs inputs one at a
time and reports each before running it. When a worker dies (a signal, an
abort, a sanitizer report), overruns the time limit (a hang) or grows past
the memory limit, the input it was on is saved with its class, and a new
worker takes over. A worker's untyped exception (one that is not a
dyngraph.DyngraphError) is a finding too.

Inputs that got past loading (their mutations reached shape inference or
execution) join a pool that later inputs mutate further.
"""

from __future__ import annotations

import collections
import glob
import hashlib
import json
import os
import pickle
import random
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional

from . import classify
from . import irmodel as ir
from .mutate import Ctx, mutate_bytes, mutate_structure

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_CRASH_DIR = os.path.join(HERE, "corpus", "crashes")
DEEP_PHASES = ("infer", "execute", "call", "state")
POOL_OP_INPUTS = 100_000  # inputs that reach execution join the pool when their ops take fewer inputs


def _op_inputs(model: ir.Program) -> int:
    return sum(len(o.inputs or ()) for o in model.ops or ())


def child_env() -> dict:
    env = dict(os.environ)
    paths = [ROOT]
    if env.get("DYNGRAPH_DEV") == "1":
        paths.insert(0, os.path.join(ROOT, "api"))
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("OMP_NUM_THREADS", "1")
    # ggml's abort attaches gdb to print a stack: seconds per abort (and it can hang under a fork server)
    env.setdefault("GGML_NO_BACKTRACE", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


def build_kind() -> str:
    return "asan" if "asan" in os.environ.get("LD_PRELOAD", "") else "release"


def generate_seeds(out_dir: str, python: str, kinds: Optional[List[str]] = None) -> None:
    # (the workers learn the library's file header from mlp.dg: it is made whatever kinds are fuzzed)
    cmd = [python, "-m", "tests.fuzz.seeds", out_dir] + (sorted(set(kinds) | {"mlp"}) if kinds else [])
    env = child_env()
    if "asan" in env.get("LD_PRELOAD", ""):
        # seeds come from the release build (the installed package, or api/ with DYNGRAPH_DEV=1): making them
        # is not what is tested, and a sanitizer report there would stop the run (today: saving a state
        # without an initial value, reproducers/save_state_without_initial_value.py)
        env.pop("LD_PRELOAD")
        paths = [p for p in env["PYTHONPATH"].split(os.pathsep) if os.path.join("asan", "pkg") not in p]
        if glob.glob(os.path.join(ROOT, "api", "dyngraph", "_backend*.so")):  # an in-tree release build
            paths.insert(0, os.path.join(ROOT, "api"))
        env["PYTHONPATH"] = os.pathsep.join(paths)
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"seed generation failed:\n{r.stdout}\n{r.stderr}")


class Seed:
    def __init__(self, kind: str, seeds_dir: str):
        self.kind = kind
        with open(os.path.join(seeds_dir, f"{kind}.dg"), "rb") as f:
            raw = f.read()
        self.body = raw[ir.body_offset(raw):]
        self.model = ir.decode(self.body)
        with open(os.path.join(seeds_dir, f"{kind}.json")) as f:
            self.steps = json.load(f)["steps"]


class Generator:
    def __init__(self, seeds: List[Seed], ctx: Ctx, rng: random.Random, raw_frac: float):
        self.seeds = seeds
        self.ctx = ctx
        self.rng = rng
        self.raw_frac = raw_frac
        self.pool: Dict[str, List[ir.Program]] = collections.defaultdict(list)

    def next(self, idx: int) -> dict:
        rng = self.rng
        seed = self.seeds[idx % len(self.seeds)]  # every kind in turn
        mode = "raw" if rng.random() < self.raw_frac else "load"
        seal = "yes"
        model = None
        r = rng.random()
        pool = self.pool[seed.kind]
        if r < 0.65:
            base = rng.choice(pool) if pool and rng.random() < 0.35 else seed.model
            model, what = mutate_structure(rng, base, self.ctx)
            body = ir.encode(model, misalign_data=rng.random() < 0.05, share=rng.random() < 0.25)
            how = "structure"
        else:
            base = ir.encode(rng.choice(pool)) if pool and rng.random() < 0.2 else seed.body
            body, what = mutate_bytes(rng, base, self.ctx)
            how = "bytes"
            if mode == "load" and rng.random() < 0.15:
                seal = rng.choice(["no", "header-flip"])
        return {"idx": idx, "kind": seed.kind, "mode": mode, "seal": seal, "body": body, "how": how, "what": what,
                "model": model}

    def feedback(self, task: dict, phase: Optional[str]) -> None:
        # a model of a million op inputs (the fanout mutator's) stays out: 704 of them would fill the memory
        if task.get("model") is not None and phase in DEEP_PHASES and _op_inputs(task["model"]) < POOL_OP_INPUTS:
            pool = self.pool[task["kind"]]
            if len(pool) < 64:
                pool.append(task["model"])
            else:
                pool[self.rng.randrange(len(pool))] = task["model"]


class Zygote:
    """The process that imported dyngraph once and forks the workers (worker.zygote)."""

    def __init__(self, python: str, seeds_dir: str, mem_mb: int):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [python, "-m", "tests.fuzz.worker", "--zygote", str(b.fileno()), seeds_dir, str(mem_mb)],
            cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            pass_fds=(b.fileno(),),
        )
        b.close()
        self.sock = a
        self.exits: Dict[int, int] = {}

    def _handle(self, msg: bytes):
        parts = msg.decode().split()
        if parts and parts[0] == "exit":
            self.exits[int(parts[1])] = int(parts[2])
        return parts

    def fork(self):
        task_r, task_w = os.pipe()
        status_r, status_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            socket.send_fds(self.sock, [b"fork"], [task_r, status_w, err_w])
        except OSError:
            raise SystemExit(self.failure("the zygote is gone"))
        for fd in (task_r, status_w, err_w):
            os.close(fd)
        self.sock.settimeout(180)
        try:
            while True:
                msg = self.sock.recv(64)
                if not msg:
                    raise SystemExit(self.failure("the zygote exited"))
                parts = self._handle(msg)
                if parts[0] == "pid":
                    return int(parts[1]), task_w, status_r, err_r
        except socket.timeout:
            raise SystemExit(self.failure("the zygote did not answer"))

    def poll(self) -> None:
        self.sock.setblocking(False)
        try:
            while True:
                msg = self.sock.recv(64)
                if not msg:
                    break
                self._handle(msg)
        except (BlockingIOError, InterruptedError):
            pass

    def wait_exit(self, pid: int, timeout: float) -> Optional[int]:
        end = time.monotonic() + timeout
        while pid not in self.exits and time.monotonic() < end:
            self.poll()
            time.sleep(0.005)
        return self.exits.pop(pid, None)

    def failure(self, what: str) -> str:
        self.log.seek(0)
        return f"fuzz workers cannot start: {what}\n" + self.log.read().decode("utf-8", "replace")[-5000:]

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Worker:
    def __init__(self, zygote: Zygote, sel: selectors.BaseSelector):
        self.zygote = zygote
        self.pid, task_w, status_r, err_r = zygote.fork()
        self.stdin = os.fdopen(task_w, "wb")
        self.status_fd = status_r
        os.set_blocking(status_r, False)
        self.sel = sel
        sel.register(status_r, selectors.EVENT_READ, self)
        self.buf = b""
        self.err = collections.deque(maxlen=400)
        self.err_file = os.fdopen(err_r, "rb")
        self.err_thread = threading.Thread(target=self._read_err, daemon=True)
        self.err_thread.start()
        self.ready = False
        self.task: Optional[dict] = None
        self.started = False
        self.phase: Optional[str] = None
        self.t0 = time.monotonic()
        self.spawned = time.monotonic()

    def _read_err(self):
        for line in iter(self.err_file.readline, b""):
            self.err.append(line.decode("utf-8", "replace"))

    def stderr_tail(self) -> str:
        self.err_thread.join(timeout=3)
        return "".join(self.err)

    def send(self, task: dict) -> None:
        payload = pickle.dumps({k: v for k, v in task.items() if k != "model"})
        self.task = task
        self.started = False
        self.phase = None
        self.t0 = time.monotonic()
        self.err.clear()
        self.stdin.write(struct.pack("<I", len(payload)) + payload)
        self.stdin.flush()

    def lines(self) -> List[str]:
        try:
            chunk = os.read(self.status_fd, 1 << 16)
        except BlockingIOError:
            return []
        if not chunk:
            return [None]  # EOF: the worker is gone
        self.buf += chunk
        *done, self.buf = self.buf.split(b"\n")
        return [d.decode("utf-8", "replace") for d in done]

    def rss_mb(self) -> int:
        try:
            with open(f"/proc/{self.pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20
        except OSError:
            return 0

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self) -> int:
        rc = self.zygote.wait_exit(self.pid, 10)
        if rc is None:
            self.kill()
            rc = self.zygote.wait_exit(self.pid, 10)
        return -9 if rc is None else rc

    def close(self) -> None:
        try:
            self.sel.unregister(self.status_fd)
        except (KeyError, ValueError):
            pass
        for f in (self.stdin,):
            try:
                f.close()
            except OSError:
                pass
        try:
            os.close(self.status_fd)
        except OSError:
            pass


class Findings:
    def __init__(self, crash_dir: str, keep: int, run_info: dict):
        self.crash_dir = crash_dir
        self.keep = keep
        self.run_info = run_info
        self.counts: Dict[str, int] = collections.Counter()
        self.first: Dict[str, dict] = {}
        self.known = known_signatures(crash_dir)
        self.saved: List[str] = []

    def add(self, task: dict, seeds: Dict[str, Seed], outcome: str, phase: Optional[str], detail: str, stderr: str,
            message: str = ""):
        sig = classify.signature(outcome, phase, detail)
        self.counts[sig] += 1
        if self.counts[sig] == 1:
            self.first[sig] = {"idx": task["idx"], "kind": task["kind"], "mode": task["mode"]}
            print(f"[finding] #{task['idx']} {task['kind']}/{task['mode']}: {sig}{' ' + message[:100] if message else ''}"
                  f"  ({'; '.join(task['what'])})", flush=True)
        if self.counts[sig] > self.keep or not self.crash_dir:
            return
        os.makedirs(self.crash_dir, exist_ok=True)
        h = hashlib.sha1(task["body"]).hexdigest()[:12]
        base = os.path.join(self.crash_dir, h)
        with open(base + ".ir", "wb") as f:
            f.write(task["body"])
        rec = {
            "signature": sig, "outcome": outcome, "phase": phase, "detail": detail, "message": message,
            "kind": task["kind"], "mode": task["mode"], "seal": task["seal"], "mutation": task["how"],
            "what": task["what"], "ir": h + ".ir", "steps": seeds[task["kind"]].steps,
            "fails_in": ["release", "asan"] if build_kind() == "release" else ["asan"],
            "found": dict(self.run_info, idx=task["idx"]), "stderr_tail": stderr[-3000:],
        }
        with open(base + ".json", "w") as f:
            json.dump(rec, f, indent=1)
        self.saved.append(base + ".json")

    def new_signatures(self) -> List[str]:
        return [s for s in self.counts if s not in self.known]


def known_signatures(crash_dir: str) -> set:
    sigs = set()
    for p in glob.glob(os.path.join(crash_dir or "", "*.json")):
        try:
            with open(p) as f:
                sigs.add(json.load(f)["signature"])
        except (OSError, ValueError, KeyError):
            pass
    return sigs


def run(args) -> int:
    python = args.python or sys.executable
    seeds_dir = args.seeds_dir
    if not args.reuse_seeds or not os.path.exists(os.path.join(seeds_dir, "schema.json")):
        t = time.monotonic()
        generate_seeds(seeds_dir, python, args.kinds)
        print(f"seeds generated in {time.monotonic() - t:.1f} s into {seeds_dir}", flush=True)
    kinds = args.kinds or sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(seeds_dir, "*.dg")))
    seeds = {k: Seed(k, seeds_dir) for k in kinds}
    with open(os.path.join(seeds_dir, "schema.json")) as f:
        ctx = Ctx(json.load(f), [s.body for s in seeds.values()])
    seed_value = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed_value)
    gen = Generator(list(seeds.values()), ctx, rng, args.raw_frac)
    info = {"seed": seed_value, "build": build_kind()}
    findings = Findings(args.crash_dir, args.keep_per_class, info)
    print(f"fuzzing {len(kinds)} kinds ({', '.join(kinds)}), seed {seed_value}, {args.jobs} worker(s), "
          f"build {build_kind()}, timeout {args.timeout} s", flush=True)

    sel = selectors.DefaultSelector()
    workers: List[Worker] = []
    outcomes = collections.Counter()
    per_kind = collections.Counter()
    deep = 0
    done = 0
    idx = 0
    restarts = 0
    startup_failures = 0
    t_start = time.monotonic()
    deadline = t_start + args.seconds if args.seconds else None
    last_report = t_start
    sealing_said = False

    zygote = Zygote(python, seeds_dir, args.mem_mb)

    def spawn():
        w = Worker(zygote, sel)
        workers.append(w)
        return w

    def finish(w: Worker, outcome: str, detail: str = "", stderr: str = ""):
        nonlocal done, deep
        task = w.task
        w.task = None
        done += 1
        per_kind[task["kind"]] += 1
        if w.phase in DEEP_PHASES:
            deep += 1
        key = outcome.split("|")[0] if outcome.startswith("untyped:") else outcome
        outcomes[key] += 1
        if classify.is_finding(outcome):
            if outcome.startswith("untyped:"):
                head, where, msg = classify.untyped_parts(outcome)
                # the class is the exception type and where it was raised; the message varies with the input
                findings.add(task, seeds, head, w.phase, where, stderr, message=msg)
            else:
                findings.add(task, seeds, outcome, w.phase, detail, stderr)
        else:
            gen.feedback(task, w.phase)

    def dead(w: Worker, why: str):
        nonlocal restarts, startup_failures
        if why in ("hang", "oom"):
            w.kill()
        rc = w.wait()
        stderr = w.stderr_tail()
        w.close()
        workers.remove(w)
        if w.task is not None and w.started:
            if why in ("hang", "oom"):
                finish(w, why, "no result within the time limit" if why == "hang" else "RSS over the memory limit", stderr)
            else:
                finish(w, classify.crash_class(rc, stderr), classify.crash_detail(stderr), stderr)
            restarts += 1
        else:
            startup_failures += 1
            if startup_failures > 3:
                sys.stderr.write(stderr)
                raise SystemExit(f"the fuzz worker keeps dying before running an input (exit {rc})")
            if w.task is not None:  # not started: give the input to the next worker
                pending.insert(0, w.task)

    pending: List[dict] = []
    try:
        for _ in range(args.jobs):
            spawn()
        while True:
            now = time.monotonic()
            timed_out = deadline is not None and now >= deadline
            stop = timed_out or bool(args.inputs and idx >= args.inputs)  # no new inputs
            if timed_out:
                pending.clear()
            if stop and not pending and all(w.task is None for w in workers):
                break
            while len(workers) < args.jobs and not stop:
                spawn()
            for w in list(workers):
                if w.task is None and w.ready and (pending or not stop):
                    if not pending:
                        pending.append(gen.next(idx))
                        idx += 1
                    try:
                        w.send(pending.pop(0))
                    except (BrokenPipeError, OSError):
                        dead(w, "died")
            # make the next inputs while the workers run (the two overlap on two cores)
            ahead = len(pending) < args.jobs and not stop
            if ahead:
                pending.append(gen.next(idx))
                idx += 1
            for key, _ in sel.select(timeout=0 if ahead else 0.05):
                w: Worker = key.data
                for line in w.lines():
                    if line is None:
                        dead(w, "died")
                        break
                    tag, _, rest = line.partition(" ")
                    if tag == "R":
                        w.ready = True
                        startup_failures = 0
                        if not sealing_said:
                            print(rest, flush=True)
                            sealing_said = True
                    elif tag == "S":
                        w.started = True
                        w.t0 = time.monotonic()
                    elif tag == "P":
                        w.phase = rest.split(" ", 1)[1]
                    elif tag == "D":
                        finish(w, rest.split(" ", 1)[1])
            now = time.monotonic()
            for w in list(workers):
                if w.task is not None and w.started and now - w.t0 > args.timeout:
                    dead(w, "hang")
                elif not w.ready and now - w.spawned > 120:
                    dead(w, "died")
                elif w.task is not None and args.mem_mb and w.rss_mb() > args.mem_mb:
                    dead(w, "oom")
            if now - last_report > args.report_every:
                last_report = now
                el = now - t_start
                print(f"  {done} inputs, {done / el:.1f}/s, {deep} past loading, "
                      f"{sum(findings.counts.values())} findings in {len(findings.counts)} classes", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        for w in list(workers):
            w.kill()
            w.close()
        zygote.close()
    elapsed = time.monotonic() - t_start
    n_find = sum(findings.counts.values())
    print("\nfinding classes (count, first input):")
    for sig, n in sorted(findings.counts.items(), key=lambda kv: -kv[1]):
        mark = "" if sig in findings.known else "  [new]"
        print(f"  {n:6d}  {sig}{mark}   (#{findings.first[sig]['idx']} {findings.first[sig]['kind']}/"
              f"{findings.first[sig]['mode']})")
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in outcomes.most_common()))
    print("per kind: " + ", ".join(f"{k} {v}" for k, v in sorted(per_kind.items())))
    if findings.saved:
        print(f"saved {len(findings.saved)} new inputs into {findings.crash_dir}")
    print(f"dyngraph fuzz ({build_kind()}, seed {seed_value}): {done} inputs of {len(kinds)} artifact kinds in "
          f"{elapsed:.0f} s ({done / max(elapsed, 1e-9):.1f} inputs/s, {deep} past loading, {restarts} worker restarts): "
          f"{n_find} crashes/hangs/untyped errors in {len(findings.counts)} classes", flush=True)
    new = findings.new_signatures()
    if args.fail_on == "any" and n_find:
        return 1
    if args.fail_on == "new" and new:
        print(f"{len(new)} classes not in {args.crash_dir}: failing", flush=True)
        return 1
    return 0
