#!/usr/bin/env bash
# Build the C++ extension with AddressSanitizer + UndefinedBehaviorSanitizer
# into build/asan, and run tests and the fuzz corpus against it. Any sanitizer
# report fails the run (signed overflow and misaligned loads included: every
# UBSan check is fatal).
#
#   tools/sanitize.sh [ci]       # CI subset: the C++-facing tests + fuzz regressions (+ a fuzz of
#                                #   DG_SANITIZE_FUZZ_SECONDS, default 60; 0 skips it)
#   tools/sanitize.sh full       # the whole test suite (extra arguments go to pytest)
#   tools/sanitize.sh build      # only build build/asan/pkg (then run anything with tools/sanitize.sh env CMD...)
#   tools/sanitize.sh env CMD..  # run CMD with the sanitized package and runtime preloaded
#
# PYTHON selects the interpreter (default: python3); it needs the project's
# build and test dependencies (pip install '.[test]'). ggml, built from its
# source in the same tree (the default), is instrumented too (a graph built wrong shows as
# an overrun in ggml's kernel; its own known reports: tools/ubsan-ggml.supp);
# OpenBLAS and Python itself are not: reports come from them only where they
# call an intercepted function (memcpy, memset, malloc...).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"
# an absolute path that keeps a venv's own (symlinked) interpreter: CMake must find the venv's packages
case "$py" in */*) py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")" ;; *) py="$(command -v "$py")" ;; esac
mode="${1:-ci}"
[ $# -gt 0 ] && shift
cd "$root"
out="$root/build/asan"
pkg="$out/pkg"
reports="$out/reports"
# every UBSan check halts (halt_on_error=1 below); shift-base and alignment are recoverable only so
# that the suppressions of ggml's own (tools/ubsan-ggml.supp) apply: UBSan skips suppressions for
# fatal checks (a report they do not suppress still fails the run: check_reports below)
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize-recover=shift-base,alignment -fno-omit-frame-pointer"

# -O1 (ASan's advice) and line tables only (-g1: reports still name file:line): about
# half the compile time of RelWithDebInfo's -O2 -g, which is most of this job on 2 cores.
# Our code outside the kernels at -O0 (DYNGRAPH_COLD_CODE_FLAGS; DG_SANITIZE_COLD_FLAGS overrides
# it, empty for -O1 everywhere): it compiles in two thirds of -O1's time, and the tests spend
# theirs in the kernels and ggml, which keep -O1
opt="-O1 -g1 -DNDEBUG"

build() {
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$root" -B "$out" "${gen[@]}" -DPython_EXECUTABLE="$(command -v "$py")" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" \
    -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
    -DDYNGRAPH_COLD_CODE_FLAGS="${DG_SANITIZE_COLD_FLAGS--O0}" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
  cmake --build "$out" -j "$(nproc)"
  # a package tree of its own: the Python sources of api/dyngraph and the sanitized extension
  rm -rf "$pkg" && mkdir -p "$pkg"
  cp -r "$root/api/dyngraph" "$pkg/"
  find "$pkg" \( -name '_backend*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
  cp "$out"/_backend*.so "$pkg/dyngraph/"
  # the C API as the wheel lays it out (tests/test_c_api.py and the hostile-file tests build C programs against it)
  cp "$out"/libdyngraph.so "$pkg/dyngraph/"
  cp -r "$out"/include "$out"/cmake "$out"/pkgconfig "$pkg/dyngraph/"
}

setenv() {
  local libasan
  libasan="$(gcc -print-file-name=libasan.so)"
  [ -f "$libasan" ] || { echo "libasan.so not found (gcc -print-file-name=libasan.so)" >&2; exit 1; }
  mkdir -p "$reports"
  # libstdc++ too: Python does not link it, and ASan must find the real __cxa_throw when it starts
  libstdcxx="$(readlink -f "$(gcc -print-file-name=libstdc++.so)")"
  export LD_PRELOAD="$libasan $libstdcxx"
  # Python never frees some memory at exit and torch keeps caches: leak checking is off.
  # allocator_may_return_null: a huge allocation fails as in a release build (the code must handle it),
  # rather than ASan reporting it
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1:allocator_may_return_null=1:log_path=$reports/asan"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$root/tools/ubsan-ggml.supp:log_path=$reports/ubsan"
  export PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}"
  unset DYNGRAPH_DEV
  # reports of regression inputs already known to fail go here, not into $reports
  export DG_SANITIZER_EXPECTED_LOG="$out/expected/report"
  mkdir -p "$out/expected"
  export GGML_NO_BACKTRACE=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
  # C programs the tests build against the sanitized libdyngraph.so are sanitized too (tests/capi_util.py)
  export DG_C_API_CFLAGS="$san"
}

# ASan writes its reports to files (log_path, every process); UBSan ignores log_path in this
# setup and writes to stderr, so the runs below tee their output to a log that is searched too.
# pytest runs with --capture=sys: C/C++ writes to fd 2 go to the log even when a test dies.
check_reports() {
  local found
  found="$(find "$reports" -type f | head -50)"
  if [ -n "$found" ]; then
    echo "SANITIZER REPORTS:" >&2
    for f in $found; do echo "== $f" >&2; head -60 "$f" >&2; done
    return 1
  fi
  if grep -nE "runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer" "$out/run.log" >&2; then
    echo "SANITIZER REPORTS in the output above (see $out/run.log)" >&2
    return 1
  fi
  echo "sanitizers: no report"
}

case "$mode" in
  build) build ;;
  env) setenv; exec "$@" ;;
  ci|full)
    t0=$(date +%s)
    build
    t1=$(date +%s)
    echo "sanitized build: $((t1 - t0)) s"
    rm -rf "$reports" "$out/expected" "$out/run.log"
    setenv
    "$py" -c "import dyngraph, sys; assert dyngraph.__file__.startswith('$pkg'), dyngraph.__file__"
    status=0
    if [ "$mode" = full ]; then
      "$py" -m pytest "$root/tests" -n auto -q -p no:cacheprovider --capture=sys "$@" 2>&1 | tee "$out/run.log" || status=$?
    else
      # the tests that drive the C++ runtime hardest, without PyTorch (see tests/fuzz/README.md)
      # (-n auto: a worker per core, as the README's command; a worker's stderr is this run's, so
      # UBSan's reports reach run.log, and a worker a sanitizer halts fails its test)
      "$py" -m pytest -n auto -q -p no:cacheprovider --capture=sys \
        "$root/tests/test_execution.py" "$root/tests/test_save_load.py" "$root/tests/test_state.py" \
        "$root/tests/test_stored_weight.py" "$root/tests/test_stored_weight_types.py" "$root/tests/test_weight_types.py" \
        "$root/tests/test_llama_decoder.py" \
        "$root/tests/test_hostile_files.py" "$root/tests/test_ir_validation.py" "$root/tests/test_hostile_dtypes.py" \
        "$root/tests/test_kernel_fault.py" "$root/tests/test_c_api.py" "$root/tests/test_shared_engine.py" \
        "$root/tests/ops" "$root/tests/fuzz" "$@" 2>&1 | tee "$out/run.log" || status=$?
    fi
    t2=$(date +%s)
    echo "sanitized tests ($mode): $((t2 - t1)) s"
    if [ "$mode" = ci ] && [ "${DG_SANITIZE_FUZZ_SECONDS:-60}" != 0 ]; then
      # a short fuzz under the sanitizers: heap overflows a release build survives silently
      ( export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:allocator_may_return_null=1:handle_abort=1"
        export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$root/tools/ubsan-ggml.supp"
        "$py" -m tests.fuzz --seconds "${DG_SANITIZE_FUZZ_SECONDS:-60}" --seed 0 --timeout 15 --mem-mb 6000 \
          --seeds-dir "$out/fuzz-seeds" --crash-dir "$root/tests/fuzz/corpus/crashes" --fail-on new ) || status=$?  # (its output is not searched: it classifies its workers' reports itself)
      echo "sanitized fuzz: $(( $(date +%s) - t2 )) s"
    fi
    check_reports || status=1
    exit $status
    ;;
  *) echo "usage: $0 [ci|full|build|env CMD...]" >&2; exit 2 ;;
esac
