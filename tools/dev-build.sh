#!/usr/bin/env bash
# Build the extension in build/dev and link it into api/dyngraph, for running
# the tests in-tree (DYNGRAPH_DEV=1) without reinstalling.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$(command -v python3)}"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$root" -B "$root/build/dev" "${gen[@]}" -DPython_EXECUTABLE="$py" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build/dev" -j "$(nproc)"
so="$(ls "$root"/build/dev/_backend*.so)"
ln -sf "../../build/dev/$(basename "$so")" "$root/api/dyngraph/$(basename "$so")"
echo "linked $(basename "$so") into api/dyngraph"
