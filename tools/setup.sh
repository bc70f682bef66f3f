#!/usr/bin/env bash
# tools/setup.sh: installs what kiln needs on a fresh Debian machine, idempotently and quietly.
#   - Debian packages (build tools and C++ libraries), only those missing;
#   - a virtual environment for the interpreter $KILN_PYTHON (default python3), from requirements.txt
#     (requirements-notorch.txt for interpreters with no torch wheel on disk).
# Prints the venv's python path on its last line of stdout; everything else goes to stderr.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

APT_PACKAGES=(bazel-bootstrap libabsl-dev pybind11-dev libopenblas-dev libdnnl-dev libgfortran-12-dev libgtest-dev libbenchmark-dev
              clang-format llvm-14-dev zlib1g-dev libzstd-dev libtinfo-dev libxml2-dev libffi-dev
              chromium)  # chromium: tests/test_compile_report.py renders tools/compile_report.py's page headless
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[setup] apt-get install ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

source "$ROOT/tools/lib.sh"
PY_BIN="$(kiln_resolve_python "${KILN_PYTHON:-python3}")"
PY_VER="$("$PY_BIN" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
VENV="${KILN_VENV_ROOT:-$HOME/.cache/kiln}/venv-py$PY_VER"
REQ="$ROOT/requirements.txt"
[ "$PY_VER" = "3.11" ] || REQ="$ROOT/requirements-notorch.txt"
STAMP="$VENV/.kiln-requirements"
if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$REQ" "$STAMP"; then
  echo "[setup] virtual environment $VENV from $(basename "$REQ")" >&2
  "$PY_BIN" -m venv "$VENV" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ" >&2
  cp "$REQ" "$STAMP"
fi
echo "$VENV/bin/python"
