#!/bin/bash
# Soak test of supervised training (scripts/soak.py): MINUTES of jobs with
# processes killed and stopped at random; each must end bitwise equal to an
# uninterrupted run. Usage: scripts/soak.sh MINUTES [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 scripts/soak.py "${1:-5}" "${2:-build}"
