#!/usr/bin/env bash
# tools/gpu/unpack.sh (sourced on the GPU machine by test.sh and bench.sh): puts the module that
# tools/gpu/pack.sh packed into python/kiln/, with its libraries in python/kiln/_libs/ (on the
# module's rpath), and exports PYTHONPATH. The GPU machine's python3 (3.12) holds PyTorch 2.11.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ -f "$ROOT/.gpu/_C.cpython-312-x86_64-linux-gnu.so.xz" ] || { echo "no .gpu/: run tools/gpu/pack.sh here and carry .gpu" >&2; exit 1; }
python3 - "$ROOT" <<'PY'
import lzma, shutil, sys, os
root = sys.argv[1]
with lzma.open(os.path.join(root, ".gpu/_C.cpython-312-x86_64-linux-gnu.so.xz")) as f, \
        open(os.path.join(root, "python/kiln/_C.cpython-312-x86_64-linux-gnu.so"), "wb") as out:
    shutil.copyfileobj(f, out)
os.makedirs(os.path.join(root, "python/kiln/_libs"), exist_ok=True)
for name in os.listdir(os.path.join(root, ".gpu/_libs")):
    shutil.copy(os.path.join(root, ".gpu/_libs", name), os.path.join(root, "python/kiln/_libs", name))
PY
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
