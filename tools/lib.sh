# tools/lib.sh: shared by the tools scripts (source it). Resolves the interpreter and runs Bazel
# with one output tree per checkout and interpreter.

# kiln_resolve_python NAME: an absolute path to a working interpreter for NAME ("python3",
# "python3.12", or a path); pyenv's installed versions stand in when its shim refuses NAME.
kiln_resolve_python() {
  local name="$1" path
  if [[ "$name" == */* ]]; then echo "$name"; return; fi
  path="$(command -v "$name" 2>/dev/null || true)"
  if [ -n "$path" ] && "$path" -c "pass" >/dev/null 2>&1; then
    "$path" -c "import sys; print(sys.executable)"
    return
  fi
  local version="${name#python}"
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version"*/bin/python3; do
    if [ -x "$candidate" ]; then echo "$candidate"; return; fi
  done
  echo "kiln: interpreter '$name' not found (KILN_PYTHON)" >&2
  return 1
}

# kiln_bazel ARGS...: bazel with an output base per checkout and interpreter, so a 3.11 and a
# 3.12 build (and several clones) each keep their own incremental state; actions are shared
# through the disk cache set in .bazelrc.
kiln_bazel() {
  local root py_ver key
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  py_ver="$("$KILN_PYTHON" -c 'import sys; print("%d%d" % sys.version_info[:2])')"
  key="$(echo "$root" | md5sum | cut -c1-8)"
  bazel --output_base="$HOME/.cache/kiln/bazel/$key-py$py_ver" "$@"
}
