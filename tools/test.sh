#!/usr/bin/env bash
# tools/test.sh: installs what is missing, builds, runs every test, and ends with one summary line.
#   1. $KILN_PYTHON (default python3, 3.11): bazel test //... (the C++ tests), the layering check
#      (tools/check_layering.sh) and pytest tests/, with PyTorch 2.13 as the oracle;
#   2. Python 3.12 (when installed): the same module built for it and pytest tests/ (no PyTorch
#      wheel exists for it here, so the oracle-driven suites skip there and run under 1).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source tools/lib.sh
LOG="$(mktemp -d)"
passed=0 failed=0 skipped=0

count_pytest() {  # adds the counts of pytest's closing line in $1
  local line n
  line="$(grep -E "[0-9]+ (passed|failed|error)" "$1" | tail -n 1)"
  for kind in passed failed skipped error errors; do
    n="$(echo "$line" | grep -oE "[0-9]+ $kind\b" | grep -oE "[0-9]+" || true)"
    n="${n:-0}"
    case "$kind" in
      passed) passed=$((passed + n)) ;;
      skipped) skipped=$((skipped + n)) ;;
      *) failed=$((failed + n)) ;;
    esac
  done
}

run_python_suite() {  # $1: interpreter name
  export KILN_PYTHON="$1"
  local venv_py
  venv_py="$(bash tools/setup.sh | tail -n 1)" || { echo "setup for $1 failed"; failed=$((failed + 1)); return; }
  if ! bash tools/build.sh; then echo "build for $1 failed"; failed=$((failed + 1)); return; fi
  echo "== pytest tests/ ($("$venv_py" -c 'import sys; print("Python %d.%d" % sys.version_info[:2])'))"
  PYTHONPATH="$ROOT/python" "$venv_py" -m pytest -q -p no:cacheprovider tests 2>&1 | tee "$LOG/pytest.log"
  local status=${PIPESTATUS[0]}
  local before=$failed
  count_pytest "$LOG/pytest.log"
  if [ "$status" -ne 0 ] && [ "$status" -ne 5 ] && [ "$failed" -eq "$before" ]; then failed=$((failed + 1)); fi
}

PRIMARY="${KILN_PYTHON:-python3}"
export KILN_PYTHON="$PRIMARY"
bash tools/setup.sh >/dev/null || { echo "kiln: 0 passed, 1 failed"; exit 1; }
KILN_PYTHON="$(kiln_resolve_python "$PRIMARY")"
export KILN_PYTHON

echo "== bazel test //... (C++ tests)"
kiln_bazel test --noshow_progress --test_summary=short //... > "$LOG/bazel.log" 2>&1
bazel_status=$?
grep -E "^//|Executed|ERROR" "$LOG/bazel.log"
cc_passed=$(grep -cE "^//.* PASSED" "$LOG/bazel.log" || true)
cc_failed=$(grep -cE "^//.* (FAILED|NO STATUS|TIMEOUT|FAILED TO BUILD)" "$LOG/bazel.log" || true)
passed=$((passed + cc_passed))
failed=$((failed + cc_failed))
if [ "$bazel_status" -ne 0 ] && [ "$cc_failed" -eq 0 ]; then
  tail -n 30 "$LOG/bazel.log"
  failed=$((failed + 1))
fi

# After the C++ tests: their Bazel server is warm, so the probes' analysis takes seconds.
echo "== layering (tools/check_layering.sh)"
if bash tools/check_layering.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

run_python_suite "$KILN_PYTHON"
if SECOND="$(kiln_resolve_python python3.12 2>/dev/null)" && [ "$SECOND" != "$(kiln_resolve_python "$PRIMARY")" ]; then
  run_python_suite "$SECOND"
fi

echo "kiln: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
