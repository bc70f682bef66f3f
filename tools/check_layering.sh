#!/usr/bin/env bash
# tools/check_layering.sh: checks that the package layering (DESIGN.md §2, the package groups in the
# root BUILD.bazel) is enforced: a package may depend on its own layer and the layers before it,
#   runtime -> codegen -> tensor -> autograd -> fx -> aot -> inductor -> dynamo -> init -> python,
# and any other dependency fails the build as "not visible". Visibility is decided by the package
# the depending target lives in, so each layer gets a temporary probe package inside it
# (<layer>/layering_probe/, removed on exit) with one cc_library per dependency; Bazel analyses
# them (--nobuild: nothing is compiled). Allowed edges must analyse, forbidden ones must fail.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source tools/lib.sh
KILN_PYTHON="$(kiln_resolve_python "${KILN_PYTHON:-python3}")" || exit 1
export KILN_PYTHON

# The layers in order; each one's probe lives in <layer>/layering_probe/.
LAYERS=(runtime codegen tensor autograd fx aot inductor dynamo init python)
# What the probes depend on, "probe_name layer label": each package of a layer that others use.
DEPS=(
  "runtime runtime //runtime"
  "runtime_cuda runtime //runtime/cuda:runtime_cuda"
  "runtime_onednn runtime //runtime/onednn"
  "codegen codegen //codegen:llvm_codegen"
  "tensor tensor //tensor"
  "autograd autograd //autograd"
  "fx fx //fx"
  "aot aot //aot"
  "inductor inductor //inductor/memory_plan"
  "dynamo dynamo //dynamo"
  "init init //init"
  "python python //python:_C.so"
  # codegen's LLVM helpers are private to //codegen: no probe, not even codegen's own, may see them.
  "codegen_llvm_expr private //codegen:llvm_expr"
)

layer_index() {  # $1: a layer name; prints its position in LAYERS (private: past the last)
  local i
  for i in "${!LAYERS[@]}"; do [ "${LAYERS[$i]}" = "$1" ] && { echo "$i"; return; }; done
  echo "${#LAYERS[@]}"
}

remove_probes() {  # only the files this script writes; rmdir keeps a directory holding anything else
  local layer
  for layer in "${LAYERS[@]}"; do
    rm -f "$layer/layering_probe/BUILD.bazel"
    rmdir "$layer/layering_probe" 2>/dev/null || true
  done
}
trap remove_probes EXIT
remove_probes  # a run that was killed may have left some behind

allowed=() forbidden=() forbidden_edge=()
for layer in "${LAYERS[@]}"; do
  mkdir -p "$layer/layering_probe"
  {
    echo "# Written by tools/check_layering.sh for one run; never committed (.gitignore)."
    for dep in "${DEPS[@]}"; do
      read -r name dep_layer label <<< "$dep"
      # The module is a cc_binary: depend on it as data. manual: //... never picks a leftover up.
      attr=deps; [ "$dep_layer" = python ] && attr=data
      echo "cc_library(name = \"$name\", $attr = [\"$label\"], tags = [\"manual\"])"
      if [ "$(layer_index "$dep_layer")" -le "$(layer_index "$layer")" ]; then
        allowed+=("//$layer/layering_probe:$name")
      else
        forbidden+=("//$layer/layering_probe:$name")
        forbidden_edge+=("$layer/ -> $label")
      fi
    done
  } > "$layer/layering_probe/BUILD.bazel"
done

LOG="$(mktemp -d)"
status=0
# Allowed edges: analysis succeeds as a whole.
if ! kiln_bazel build --nobuild --noshow_progress "${allowed[@]}" > "$LOG/allowed.log" 2>&1; then
  echo "layering: an allowed dependency fails to analyse:"
  grep -E "ERROR" "$LOG/allowed.log" | head -n 20
  status=1
fi
# Forbidden edges: each probe fails, and for visibility (not for some other error).
kiln_bazel build --nobuild --keep_going --noshow_progress "${forbidden[@]}" > "$LOG/forbidden.log" 2>&1
escaped=()
for i in "${!forbidden[@]}"; do
  grep -qF "is not visible from target '${forbidden[$i]}'" "$LOG/forbidden.log" || escaped+=("${forbidden_edge[$i]}")
done
if [ "${#escaped[@]}" -gt 0 ]; then
  echo "layering: forbidden dependencies that analyse (check the visibility in their BUILD.bazel):"
  printf '  %s\n' "${escaped[@]}"
  status=1
fi
rm -rf "$LOG"

if [ "$status" -eq 0 ]; then
  echo "layering: ${#allowed[@]} allowed dependencies analyse, ${#forbidden[@]} forbidden ones fail as not visible"
fi
exit "$status"
