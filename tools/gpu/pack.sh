#!/usr/bin/env bash
# tools/gpu/pack.sh: builds kiln._C for Python 3.12 (the GPU machine's) and packs what the GPU
# machine lacks into .gpu/ (git-ignored; name it in the device tool's `carry`):
#   .gpu/_C.cpython-312-x86_64-linux-gnu.so.xz  the stripped module (LLVM linked in), xz-compressed
#                                                to fit the 64 MiB the device tool carries;
#   .gpu/_libs/                                  shared libraries it needs beyond glibc/libstdc++
#                                                (Debian's libgfortran and libquadmath; their static
#                                                archives are not position-independent).
# tools/gpu/test.sh and tools/gpu/bench.sh unpack it there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export KILN_PYTHON="${KILN_PYTHON_GPU:-$HOME/.cache/kiln/venv-py3.12/bin/python}"
bash tools/build.sh >&2
SO="python/kiln/_C.cpython-312-x86_64-linux-gnu.so"
rm -rf .gpu && mkdir -p .gpu/_libs
strip --strip-unneeded -o .gpu/_C.so "$SO"
xz -T2 -6 -c .gpu/_C.so > ".gpu/$(basename "$SO").xz"
rm .gpu/_C.so
for lib in libgfortran.so.5 libquadmath.so.0; do
  cp -L "/lib/x86_64-linux-gnu/$lib" .gpu/_libs/
done
# What the module still needs from the system: each must exist on Ubuntu 24.04.
readelf -d "$SO" | awk '/NEEDED/ {print $5}' | tr -d '[]' > .gpu/needed.txt
du -sh .gpu >&2
cat .gpu/needed.txt >&2
