#!/usr/bin/env bash
# tools/build.sh: builds kiln._C for $KILN_PYTHON (default python3) and places it beside the
# Python sources (python/kiln/_C<ext suffix>), so PYTHONPATH=python imports kiln. Incremental.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export KILN_PYTHON="${KILN_PYTHON:-python3}"
# One Bazel output tree per interpreter, so switching between 3.11 and 3.12 rebuilds nothing.
PY_VER="$("$(command -v "$KILN_PYTHON")" -c 'import sys; print("%d%d" % sys.version_info[:2])')"
BAZEL=(bazel --output_base="$HOME/.cache/kiln/bazel-out-py$PY_VER")
"${BAZEL[@]}" build --noshow_progress --ui_event_filters=-info,-stdout //python:_C.so //python:ext_suffix >&2
BIN="$("${BAZEL[@]}" info bazel-bin 2>/dev/null)"
SUFFIX="$(cat "$BIN/python/ext_suffix.txt")"
DEST="python/kiln/_C$SUFFIX"
if ! cmp -s "$BIN/python/_C.so" "$DEST"; then
  rm -f "$DEST"
  cp "$BIN/python/_C.so" "$DEST"
  chmod u+w "$DEST"
fi
