#!/usr/bin/env bash
# tools/demo.sh: the main job. For now, a short tour of eager kiln: creation, views, broadcasting,
# matmul, and a timing table against numpy (and PyTorch where installed). Installs what it needs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$ROOT/tools/python" "$ROOT/tools/demo.py" "$@"
