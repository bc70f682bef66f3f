#!/usr/bin/env bash
# tools/asan_python.sh: runs the venv's Python against a kiln._C built with AddressSanitizer and
# UndefinedBehaviorSanitizer (--config=asan in .bazelrc), so a heap overflow, use-after-free or
# signed overflow in the C++ stops the run with a report at the faulting line instead of corrupting
# memory that some later test trips over. The arguments go to python:
#   tools/asan_python.sh -m pytest -q -x tests/test_index_ops.py
#   tools/asan_python.sh my_repro.py
# The instrumented module is built beside the normal one (bazel-out/k8-fastbuild-asan, from
# --platform_suffix) and imported from a shadow package, $KILN_ASAN_ROOT/kiln (default
# ~/.cache/kiln/asan-<checkout>), whose files are links to python/kiln except _C*.so; python/kiln
# itself is left alone. About 2-3x slower than the normal module; LLVM's JIT code is not instrumented.
#
# The environment, and why:
#   LD_PRELOAD=libasan.so libstdc++.so  the interpreter is not instrumented, so ASan's runtime must
#                           be loaded before anything else or it cannot intercept malloc; libstdc++
#                           with it, or ASan finds no real __cxa_throw to forward to and aborts
#                           ("CHECK failed: ... real___cxa_throw") at kiln's first C++ exception.
#   log_path                pytest captures fd 2 and loses it when ASan aborts the process, so
#                           reports go to files, printed here after Python exits.
#   PYTHONMALLOC=malloc     CPython's small-object allocator hides overruns of Python buffers
#                           (bytearray, memoryview targets) inside its arenas; plain malloc shows them.
#   detect_leaks=0          CPython keeps interned objects and module state until exit by design,
#                           so LeakSanitizer would report thousands of "leaks" that are not bugs.
#   allocator_may_return_null=1  kiln.empty(huge) must raise as PyTorch does; by default ASan aborts
#                           on an allocation larger than it supports instead of returning NULL.
#   halt_on_error/print_stacktrace  the first UB report ends the run with its stack
#                           (the build also uses -fno-sanitize-recover=undefined).
# KILN_ASAN_OPTIONS (appended) adds or overrides options, e.g. KILN_ASAN_OPTIONS=detect_leaks=1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source tools/lib.sh
KILN_PYTHON="$(kiln_resolve_python "${KILN_PYTHON:-python3}")"
export KILN_PYTHON
PY_VER="$("$KILN_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
VENV_PY="${KILN_VENV_ROOT:-$HOME/.cache/kiln}/venv-py$PY_VER/bin/python"
[ -x "$VENV_PY" ] || VENV_PY="$(bash tools/setup.sh | tail -n 1)"

kiln_bazel build --config=asan --noshow_progress --ui_event_filters=-info,-stdout \
  //python:_C.so //python:ext_suffix >&2
BIN="$(kiln_bazel info --config=asan bazel-bin 2>/dev/null)"
SUFFIX="$(cat "$BIN/python/ext_suffix.txt")"

SHADOW="${KILN_ASAN_ROOT:-$HOME/.cache/kiln/asan-$(echo "$ROOT" | md5sum | cut -c1-8)}"
mkdir -p "$SHADOW/kiln"
# Links follow python/kiln as it is now (files added or removed since the last run included).
find "$SHADOW/kiln" -mindepth 1 -maxdepth 1 -type l -delete
for entry in "$ROOT"/python/kiln/*; do
  case "$(basename "$entry")" in _C*.so|__pycache__) continue ;; esac
  ln -s "$entry" "$SHADOW/kiln/$(basename "$entry")"
done
if ! cmp -s "$BIN/python/_C.so" "$SHADOW/kiln/_C$SUFFIX"; then
  rm -f "$SHADOW/kiln/_C$SUFFIX"
  cp "$BIN/python/_C.so" "$SHADOW/kiln/_C$SUFFIX"
fi

LOGS="$(mktemp -d)"
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"
export PYTHONMALLOC=malloc
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:halt_on_error=1:strict_string_checks=1:log_path=$LOGS/asan${KILN_ASAN_OPTIONS:+:$KILN_ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$LOGS/ubsan"
export PYTHONPATH="$SHADOW${PYTHONPATH:+:$PYTHONPATH}"
status=0
"$VENV_PY" "$@" || status=$?
if compgen -G "$LOGS/*" >/dev/null; then
  cat "$LOGS"/* >&2
  echo "asan_python.sh: sanitizer reports above (kept in $LOGS)" >&2
  [ "$status" -ne 0 ] || status=1
else
  rm -rf "$LOGS"
fi
exit "$status"
