#!/usr/bin/env bash
# Installs Hugging Face transformers 4.30.2 (and its pure-Python dependencies)
# into DIR for Debian's /usr/bin/python3, whose torch 1.13 it supports.
# scripts/export_reference_models.py puts DIR (env PIPETRAIN_PYDEPS) on
# sys.path. The numpy that pip pulls in (Debian's version) is deleted so Debian's
# numpy, which Debian's torch was built against, stays the one imported.
# Idempotent: does nothing when DIR already provides transformers 4.30.2.
# Usage: scripts/install_transformers.sh [--check] [DIR]   (default /opt/pipetrain/pydeps;
#        --check: exit 1 when it is not there, install nothing)
set -euo pipefail
check=0
[[ ${1:-} == --check ]] && { check=1; shift; }
dir=${1:-${PIPETRAIN_PYDEPS:-/opt/pipetrain/pydeps}}
version=4.30.2
py=/usr/bin/python3

installed() {
  PYTHONPATH="$dir" "$py" -c \
    "import transformers, sys; sys.exit(transformers.__version__ != '$version')" 2>/dev/null
}

if installed; then
  echo "transformers $version in $dir: present"
  exit 0
fi
((check == 0)) || exit 1
mkdir -p "$dir"
pip_args=(-m pip install --quiet --disable-pip-version-check --no-warn-script-location --root-user-action=ignore
          --target "$dir" --upgrade "transformers==$version")
# Debian's pip refuses to install outside apt (PEP 668) unless told to.
if "$py" -m pip install --help 2>/dev/null | grep -q -- --break-system-packages; then
  pip_args+=(--break-system-packages)
fi
# The resolver is held to Debian's numpy (the one deleted below is that version), so that
# it finds nothing to report against Debian's scipy, which needs numpy < 1.27.
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
"$py" -c 'import numpy; print("numpy==" + numpy.__version__)' >"$constraints"
pip_args+=(--constraint "$constraints")
"$py" "${pip_args[@]}"
rm -rf "$dir"/numpy "$dir"/numpy.libs "$dir"/numpy-*.dist-info "$dir"/bin/f2py*
installed || { echo "transformers $version did not import from $dir" >&2; exit 1; }
echo "transformers $version in $dir: installed"
