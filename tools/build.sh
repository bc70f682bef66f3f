#!/usr/bin/env bash
# tools/build.sh: builds kiln._C for $KILN_PYTHON (default python3) and places it beside the
# Python sources (python/kiln/_C<ext suffix>), so PYTHONPATH=python imports kiln. Incremental.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source tools/lib.sh
KILN_PYTHON="$(kiln_resolve_python "${KILN_PYTHON:-python3}")"
export KILN_PYTHON
kiln_bazel build --noshow_progress --ui_event_filters=-info,-stdout //python:_C.so //python:ext_suffix \
  //runtime/cuda/testing:libcuda.so.1 >&2
BIN="$(kiln_bazel info bazel-bin 2>/dev/null)"
SUFFIX="$(cat "$BIN/python/ext_suffix.txt")"
DEST="python/kiln/_C$SUFFIX"
if ! cmp -s "$BIN/python/_C.so" "$DEST"; then
  rm -f "$DEST"
  cp "$BIN/python/_C.so" "$DEST"
  chmod u+w "$DEST"
fi
# The fake CUDA driver for tests on machines without a GPU (runtime/cuda/testing/).
mkdir -p .build/fake_cuda
if ! cmp -s "$BIN/runtime/cuda/testing/libcuda.so.1" .build/fake_cuda/libcuda.so.1; then
  rm -f .build/fake_cuda/libcuda.so.1
  cp "$BIN/runtime/cuda/testing/libcuda.so.1" .build/fake_cuda/libcuda.so.1
fi
