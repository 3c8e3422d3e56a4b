#!/usr/bin/env bash
# The install and the Debian package, as a user gets them: `cmake --install`
# into a fresh prefix, and the .deb CPack makes unpacked with `dpkg -x` into a
# fresh root. From each, with the source and build trees out of sight (the
# build's own SentencePiece module renamed for the duration): pipetrain
# --version names the module inside the install, a few LeNet steps train on
# Fashion-MNIST, and a SentencePiece tokenizer trains. The .deb's
# dependencies must be Debian package names that apt knows.
# Usage: tests/install_check.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
work=$(mktemp -d)
module=$build/cli/libpipetrain_sentencepiece.so
restore() {
  [[ -e $module.hidden ]] && mv "$module.hidden" "$module"
  rm -rf "$work"
}
trap restore EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
(cd "$build" && cpack -G DEB -B "$work/package" >/dev/null 2>&1) || { echo "install check: cpack failed" >&2; exit 1; }
deb=$(ls "$work"/package/pipetrain_*_amd64.deb)
dpkg-deb -x "$deb" "$work/root"
depends=$(dpkg-deb -f "$deb" Depends)
echo "install check: $(basename "$deb"), $(du -k "$deb" | cut -f1) KiB; Depends: $depends"
# Every dependency is a package apt knows by that name.
for dep in $(echo "$depends" | tr ',' '\n' | sed 's/(.*)//; s/|.*//' | tr -d ' '); do
  apt-cache show "$dep" >/dev/null 2>&1 || { echo "install check: unknown package '$dep'" >&2; exit 1; }
done

# The build's module out of reach: the installed binaries must find their own.
[[ -e $module ]] && mv "$module" "$module.hidden"
for bin in "$work/prefix/bin/pipetrain" "$work/root/usr/bin/pipetrain"; do
  tree=$(dirname "$(dirname "$bin")")
  run=$work/run-$(basename "$(dirname "$tree")")
  mkdir -p "$run"
  (
    cd "$run"  # nothing from the source tree: a fresh working directory
    version=$("$bin" --version)
    grep -q "^sentencepiece *$tree/lib/pipetrain/libpipetrain_sentencepiece.so$" <<<"$version" ||
      { echo "$version"; echo "install check: $bin does not load its own SentencePiece module" >&2; exit 1; }
    "$bin" zoo export lenet -o lenet.onnx >/dev/null
    "$bin" train lenet.onnx --data fashion-mnist --batch 32 --max-steps 5 --max-samples 640 \
      --loss cross-entropy --stages 2 --schedule 1f1b --quiet --run-dir run -o trained.onnx >/dev/null
    [[ -s trained.onnx && -s run/metrics.jsonl ]] ||
      { echo "install check: $bin trained nothing" >&2; exit 1; }
    seq 1 3000 | awk '{ print "line " $1 " of the quick brown fox that jumps over " $1 % 7 " lazy dogs" }' >text.txt
    "$bin" tokenize text.txt --vocab 64 -o spm.model >/dev/null
    [[ -s spm.model ]] || { echo "install check: $bin trained no tokenizer" >&2; exit 1; }
    echo "install check: $bin: $(head -1 <<<"$version"), trained 5 LeNet steps pipelined, SentencePiece loaded from $tree/lib/pipetrain"
  )
done
