#!/usr/bin/env bash
# tools/demo.sh: the main job. Trains an MLP and a CNN on the digits data eagerly and compiled (progress bar,
# then a table of parameters, epochs, seconds and test accuracy, saved in demo-out/ with a plot of loss and
# test accuracy per epoch), then a short eager tour with a timing table against numpy and PyTorch. Installs what it needs. `--help` lists the options (one model, compiled only,
# fewer epochs, where the table and the plot go) without setting up or building anything.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for arg in "$@"; do
  case "$arg" in -h|--help) exec python3 "$ROOT/tools/demo.py" --help ;; esac
done
exec "$ROOT/tools/python" "$ROOT/tools/demo.py" "$@"
