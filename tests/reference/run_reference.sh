#!/usr/bin/env bash
# Exports the PyTorch reference models (cached in the build tree) and checks
# pipetrain's forward outputs against PyTorch's.
set -euo pipefail
checker=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
/usr/bin/python3 "$here/../../scripts/export_reference_models.py" "$out" 2> "$out.export.log" ||
  { cat "$out.export.log"; exit 1; }
exec "$checker" "$out"
