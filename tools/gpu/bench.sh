#!/usr/bin/env bash
# tools/gpu/bench.sh: tools/gpu/bench.py on the GPU machine (after tools/gpu/pack.sh here), log
# under $OUT; the table is printed last.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
source tools/gpu/unpack.sh
OUT="${OUT:-$ROOT/.gpu/out}"
mkdir -p "$OUT"
python3 tools/gpu/bench.py 2>&1 | tee "$OUT/bench.log"
exit "${PIPESTATUS[0]}"
