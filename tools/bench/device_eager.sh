#!/usr/bin/env bash
# tools/bench/device_eager.sh: the eager and autograd benchmarks on the device machine, whose python3 is 3.12
# with PyTorch there as the peer. Builds nothing: build here first with
#   KILN_PYTHON=python3.12 bash tools/build.sh
# and carry python/kiln/_C.cpython-312-x86_64-linux-gnu.so (the device tool's `carry`), plus the
# Debian shared libraries it links (Abseil, OpenBLAS, gfortran, quadmath) copied into .devlibs/:
#   mkdir -p .devlibs && cp -L $(ldd python/kiln/_C.cpython-312-*.so | grep -E "absl|blas|fortran|quadmath" | awk '{print $3}') .devlibs/
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[ -d .devlibs ] && export LD_LIBRARY_PATH="$PWD/.devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python3 -c "import sys, torch, numpy; print(sys.version.split()[0], 'torch', torch.__version__, 'numpy', numpy.__version__)"
PYTHONPATH=python python3 tools/bench/eager_bench.py
PYTHONPATH=python python3 tools/bench/autograd_bench.py
