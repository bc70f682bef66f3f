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
exit "${PIPESTATUS[0]}"
