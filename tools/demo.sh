#!/usr/bin/env bash
# tools/demo.sh: the main job. Trains an MLP and a CNN on the digits data eagerly (progress bar, then a table
# of parameters, epochs, seconds and test accuracy), then a short eager tour with a timing table against
# numpy and PyTorch. Installs what it needs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$ROOT/tools/python" "$ROOT/tools/demo.py" "$@"
