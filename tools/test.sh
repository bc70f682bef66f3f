#!/usr/bin/env bash
# tools/test.sh: installs what is missing, builds everything, runs every test, and ends with one
# summary line. Runs the C++ tests (bazel test //...) and pytest (tests/) for $KILN_PYTHON.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export KILN_PYTHON="${KILN_PYTHON:-python3}"
VENV_PY="$(bash tools/setup.sh | tail -n 1)" || { echo "setup failed"; exit 1; }
bash tools/build.sh || { echo "build failed"; exit 1; }
PY_VER="$("$(command -v "$KILN_PYTHON")" -c 'import sys; print("%d%d" % sys.version_info[:2])')"
BAZEL=(bazel --output_base="$HOME/.cache/kiln/bazel-out-py$PY_VER")

echo "== C++ tests (bazel test //...)"
"${BAZEL[@]}" test --noshow_progress //... 2>&1 | tee /tmp/kiln-bazel-test.log | grep -Ev "^(INFO|Loading|Analyzing)"
cc_status=${PIPESTATUS[0]}
cc_passed=$(grep -cE "PASSED" /tmp/kiln-bazel-test.log || true)
cc_failed=$(grep -cE "FAILED|NO STATUS|TIMEOUT" /tmp/kiln-bazel-test.log || true)

echo "== Python tests (pytest tests/)"
PYTHONPATH="$ROOT/python" "$VENV_PY" -m pytest -q -p no:cacheprovider tests 2>&1 | tee /tmp/kiln-pytest.log
py_status=${PIPESTATUS[0]}
py_line=$(grep -E "[0-9]+ (passed|failed)" /tmp/kiln-pytest.log | tail -n 1)
py_passed=$(echo "$py_line" | grep -oE "[0-9]+ passed" | grep -oE "[0-9]+" || echo 0)
py_failed=$(echo "$py_line" | grep -oE "[0-9]+ failed" | grep -oE "[0-9]+" || echo 0)
py_skipped=$(echo "$py_line" | grep -oE "[0-9]+ skipped" | grep -oE "[0-9]+" || echo 0)

passed=$((cc_passed + ${py_passed:-0}))
failed=$((cc_failed + ${py_failed:-0}))
[ "$cc_status" -ne 0 ] && [ "$cc_failed" -eq 0 ] && failed=$((failed + 1))
[ "$py_status" -ne 0 ] && [ "${py_failed:-0}" -eq 0 ] && failed=$((failed + 1))
echo "kiln: $passed passed, $failed failed, ${py_skipped:-0} skipped (C++ targets: $cc_passed passed; pytest: ${py_passed:-0} passed)"
[ "$failed" -eq 0 ]
