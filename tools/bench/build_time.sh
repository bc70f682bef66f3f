#!/usr/bin/env bash
# tools/bench/build_time.sh: how long the tree takes to build from nothing, and to rebuild after
# a change to one op file (issue 20: at most 15 minutes and 2 minutes on the 2-core machine).
#
#     bash tools/bench/build_time.sh [TARGETS...]     # default: //... (the whole tree, tests too)
#
# Builds a clone of HEAD in a fresh Bazel output base with the disk cache off, so no action is
# reused from an earlier build; then appends a unique comment to tensor/ops/unary.cc (an op file:
# the unary ops' registration) and builds again, then to tensor/ops/unary_kernels.h (their element
# functions and loops, which four files compile: Note [Unary kernels in several files]) and builds
# again. Prints the three wall times and the clean build's slowest actions (from Bazel's JSON
# profile), the translation units to split first, and the compile time of each package. Leaves
# nothing behind but that profile (copied to $KILN_BUILD_PROFILE, default
# /tmp/kiln_build_profile.json.gz): the server is shut down, the clone and its output base deleted.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/tools/lib.sh"
KILN_PYTHON="$(kiln_resolve_python "${KILN_PYTHON:-python3}")"
export KILN_PYTHON
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(//...)
work="$(mktemp -d /tmp/kiln_build_time.XXXXXX)"
cleanup() {
  (cd "$work/tree" 2>/dev/null && bazel --output_base="$work/base" shutdown >/dev/null 2>&1) || true
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
git -C "$ROOT" clone -q "$ROOT" "$work/tree"
cd "$work/tree"
build() {
  bazel --output_base="$work/base" build --disk_cache= --noshow_progress --ui_event_filters=-info,-stdout \
    --profile="$work/profile.json.gz" "${TARGETS[@]}" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
}
start=$(date +%s)
build
cp "$work/profile.json.gz" "$work/clean_profile.json.gz"
cp "$work/profile.json.gz" "${KILN_BUILD_PROFILE:-/tmp/kiln_build_profile.json.gz}"
clean=$(( $(date +%s) - start ))
echo "// build_time.sh probe $(date +%s%N)" >> tensor/ops/unary.cc
start=$(date +%s)
build
rebuild=$(( $(date +%s) - start ))
echo "// build_time.sh probe $(date +%s%N)" >> tensor/ops/unary_kernels.h
start=$(date +%s)
build
rebuild_kernels=$(( $(date +%s) - start ))
printf 'clean build of %s: %dm%02ds (%d cores, load %s)\n' "${TARGETS[*]}" $((clean / 60)) $((clean % 60)) \
  "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'rebuild after a change to tensor/ops/unary.cc: %dm%02ds\n' $((rebuild / 60)) $((rebuild % 60))
printf 'rebuild after a change to tensor/ops/unary_kernels.h: %dm%02ds\n' $((rebuild_kernels / 60)) \
  $((rebuild_kernels % 60))
echo "slowest actions of the clean build (wall seconds each):"
python3 - "$work/clean_profile.json.gz" <<'PY'
import gzip, json, sys
with open(sys.argv[1], "rb") as f:
    gzipped = f.read(2) == b"\x1f\x8b"
events = json.load(gzip.open(sys.argv[1]) if gzipped else open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
actions = [e for e in events if e.get("ph") == "X" and e.get("cat") == "action processing"]
total = sum(e["dur"] for e in actions) / 1e6
print(f"  {len(actions)} actions, {total:.0f} s in all")
for e in sorted(actions, key=lambda e: -e["dur"])[:15]:
    print(f"  {e['dur'] / 1e6:7.1f}  {e['name']}")
# "Compiling tensor/ops/unary.cc" -> tensor/ops: where to look once no single file stands out.
packages = {}
for e in actions:
    words = e["name"].split()
    if len(words) >= 2 and words[0] == "Compiling":
        package = words[1].rsplit("/", 1)[0] if "/" in words[1] else "."
        packages[package] = packages.get(package, 0) + e["dur"] / 1e6
print("compile seconds by package:")
for package, seconds in sorted(packages.items(), key=lambda kv: -kv[1])[:12]:
    print(f"  {seconds:7.1f}  {package}")
PY
