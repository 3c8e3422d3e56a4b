#!/usr/bin/env bash
# Exports the PyTorch reference models (cached in the build tree), checks
# pipetrain's outputs and gradients against PyTorch's float64 ones, then
# trains one SGD step from the command line on each model with its own loss.
# Usage: run_reference.sh REFERENCE_CHECK PIPETRAIN OUT_DIR
set -euo pipefail
checker=$1
pipetrain=$2
out=$3
here=$(cd "$(dirname "$0")" && pwd)
/usr/bin/python3 "$here/../../scripts/export_reference_models.py" "$out" 2> "$out.export.log" ||
  { cat "$out.export.log"; exit 1; }
status=0
"$checker" "$out" || status=1
/usr/bin/python3 "$here/sgd_step_check.py" "$pipetrain" "$out" || status=1
exit $status
