#!/usr/bin/env bash
# tools/gpu/test.sh: the CUDA test suite on the GPU machine (run through the device tool, after
# tools/gpu/pack.sh here): tests/cuda against the real driver, logs under $OUT.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
source tools/gpu/unpack.sh
OUT="${OUT:-$ROOT/.gpu/out}"
mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__)"
  python3 -c "import kiln; print('kiln.cuda.is_available', kiln.cuda.is_available(), kiln.cuda.device_count(), kiln._C._cuda_driver_path(), kiln._C._cuda_unavailable_reason())"
} 2>&1 | tee "$OUT/env.txt"
python3 -m pytest -q -p no:cacheprovider tests/cuda 2>&1 | tee "$OUT/test_cuda.log"
status=${PIPESTATUS[0]}
# The kernels that meet bad input (indices out of range, reported through the device error word)
# under compute-sanitizer's memcheck: a bad index must skip its element, never touch memory out of
# bounds. An unset offset there wrote to a stray address that only one host's GPU faulted on.
SANITIZER=/usr/local/cuda-13.0/bin/compute-sanitizer
if [ -x "$SANITIZER" ]; then
  "$SANITIZER" --tool memcheck --error-exitcode 86 --print-limit 20 \
    python3 -m pytest -q -p no:cacheprovider tests/cuda/test_cuda_index.py tests/cuda/test_cuda_conv.py \
    -k "raise_at" 2>&1 | tail -40 | tee "$OUT/memcheck.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
exit "$status"
