#!/usr/bin/env bash
# Pre-release ISA matrix (docs/guide/cpu-numerics.md, issue 20): the numerics tests
# against ggml built for x86-64-v3 (GGML_NATIVE=OFF: SSE4.2, AVX, AVX2, FMA, F16C, BMI2)
# as well as the native build, each with every DYNGRAPH_KERNEL_ISA level of our kernels
# this CPU runs (generic, avx2, avx512, avx512vnni: the best it has and those below).
# Too long for CI (a second ggml build); run it before a release and on a new kind of CPU.
#
# usage: tools/isa_matrix.sh [pytest paths/args...]     (default: tests/ops tests/test_build_rules.py)
# env:   PYTHON (default python3), GGML_SOURCE (a ggml tree: DYNGRAPH_GGML_SOURCE; default the pinned sdist),
#        JOBS (build jobs, default nproc), BUILDS ("v3 native", the ggml builds to test),
#        LEVELS (default: every level this CPU has), NATIVE_BUILD (a native build to reuse, default build/dev)
# Each build lives in build/isa-<name>; the tests import it through build/isa-<name>/pkg (a copy of
# api/dyngraph with that build's extension), so an in-tree build/dev stays as it is.
# Prints one line per cell and exits non-zero if any cell failed.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
# an absolute path (the cells run from /tmp) that keeps a venv's own, symlinked, interpreter
case "$py" in */*) py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")" ;; *) py="$(command -v "$py")" ;; esac
jobs="${JOBS:-$(nproc)}"
builds="${BUILDS:-v3 native}"
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=(tests/ops tests/test_build_rules.py)
src=()
[ -n "${GGML_SOURCE:-}" ] && src=(-DDYNGRAPH_GGML_SOURCE="$GGML_SOURCE")
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
command -v ccache >/dev/null && gen+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

build() {  # name, cmake args...
    local name="$1"; shift
    local dir="$root/build/isa-$name"
    cmake -S "$root" -B "$dir" "${gen[@]}" -DPython_EXECUTABLE="$("$py" -c 'import sys; print(sys.executable)')" \
        -DCMAKE_BUILD_TYPE=Release "${src[@]}" "$@" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; return 1; }
    cmake --build "$dir" -j "$jobs" >"$dir.build.log" 2>&1 || { tail -30 "$dir.build.log"; return 1; }
    package "$dir"
}

package() {  # build dir: $dir/pkg/dyngraph = api/dyngraph + that build's extension
    local dir="$1"
    rm -rf "$dir/pkg" && mkdir -p "$dir/pkg"
    cp -r "$root/api/dyngraph" "$dir/pkg/dyngraph"
    rm -f "$dir"/pkg/dyngraph/_backend*.so
    ln -s "$(ls "$dir"/_backend*.so)" "$dir/pkg/dyngraph/"
}

levels="${LEVELS:-$(cd /tmp && "$py" - <<'PY'
flags = set()
try:
    flags = next((set(l.split(":", 1)[1].split()) for l in open("/proc/cpuinfo") if l.startswith("flags")), set())
except OSError:
    pass
out = ["generic"]
if {"avx2", "fma", "f16c"} <= flags:
    out.append("avx2")
    if {"avx512f", "avx512vl"} <= flags:
        out.append("avx512")
        if {"avx512bw", "avx512_vnni", "avx512vbmi"} <= flags:
            out.append("avx512vnni")
print(" ".join(out))
PY
)}"
[ -n "$levels" ] || { echo "no kernel levels found (is $py a working interpreter?)" >&2; exit 2; }

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)"
echo "x86 extensions: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|amx|f16c|fma|bmi2)' | sort | xargs)"
echo "kernel levels: $levels"
status=0
results=()
for b in $builds; do
    case "$b" in
        v3) build v3 -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
                -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF || { results+=("$b: BUILD FAILED"); status=1; continue; } ;;
        native)
            nb="${NATIVE_BUILD:-$root/build/dev}"
            if [ -e "$nb/CMakeCache.txt" ] && grep -q 'GGML_NATIVE:BOOL=ON' "$nb/CMakeCache.txt"; then
                cmake --build "$nb" -j "$jobs" >"$root/build/isa-native.build.log" 2>&1 || { results+=("$b: BUILD FAILED"); status=1; continue; }
                mkdir -p "$root/build/isa-native" && rm -rf "$root/build/isa-native/pkg"
                mkdir -p "$root/build/isa-native/pkg" && cp -r "$root/api/dyngraph" "$root/build/isa-native/pkg/dyngraph"
                rm -f "$root"/build/isa-native/pkg/dyngraph/_backend*.so
                ln -s "$(ls "$nb"/_backend*.so)" "$root/build/isa-native/pkg/dyngraph/"
            else
                build native -DGGML_NATIVE=ON || { results+=("$b: BUILD FAILED"); status=1; continue; }
            fi ;;
        *) echo "unknown build $b (v3, native)"; exit 2 ;;
    esac
    pkg="$root/build/isa-$b/pkg"
    flags="$(cd /tmp && PYTHONPATH="$pkg" "$py" -c 'import dyngraph as dg; print(" ".join(dg._backend.build_info()["ggml_cpu_isa_flags"]))')"
    for level in $levels; do
        log="$root/build/isa-$b-$level.log"
        env -u DYNGRAPH_DEV PYTHONPATH="$pkg" DYNGRAPH_KERNEL_ISA="$level" "$py" -m pytest -q -p no:cacheprovider \
            "${tests[@]}" >"$log" 2>&1
        rc=$?
        got="$(cd /tmp && PYTHONPATH="$pkg" DYNGRAPH_KERNEL_ISA="$level" "$py" -c 'import dyngraph as dg; print(dg._backend.kernel_isa())')"
        summary="$(tail -1 "$log")"
        results+=("ggml $b [$flags] x kernels $level (runs $got): $summary")
        [ $rc -ne 0 ] && status=1
    done
done
printf '%s\n' "${results[@]}"
exit $status
