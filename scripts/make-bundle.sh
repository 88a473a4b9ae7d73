#!/usr/bin/env bash
# Writes dist/distrain-<version>-linux-<arch>.tar.gz: bin/distrain plus lib/ with every
# shared library it needs that a bare Linux lacks, found through an $ORIGIN rpath, and
# the CUDA plugin lib/libdistrain_cuda.so when the build has it (opened only when a cuda
# device is asked for, so bin/distrain itself links no CUDA library).
# Left out on purpose: glibc (it must be the host's own) and the CUDA, cuBLAS, cuDNN and
# NCCL libraries (the host's, or a PyTorch installation's: bin/distrain-gpu finds them).
# usage: scripts/make-bundle.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=${1:?usage: make-bundle.sh BUILD_DIR OUT_DIR}
out=${2:?usage: make-bundle.sh BUILD_DIR OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
command -v patchelf >/dev/null || { echo "make-bundle: patchelf is missing (apt-get install patchelf)" >&2; exit 2; }
[ -x "$build/distrain" ] || { echo "make-bundle: $build/distrain not found; build first (make)" >&2; exit 2; }

version=$("$build/distrain" --version | awk '{print $2}')
name="distrain-$version-linux-$(uname -m)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage="$work/$name"
mkdir -p "$stage/bin" "$stage/lib"

if ldd "$build/distrain" | grep -q "not found"; then
  echo "make-bundle: $build/distrain has unresolved libraries:" >&2
  ldd "$build/distrain" | grep "not found" >&2
  exit 2
fi

cp "$build/distrain" "$stage/bin/distrain"
patchelf --set-rpath '$ORIGIN/../lib' "$stage/bin/distrain"
# ldd lists the whole dependency tree, so indirect needs (HDF5's libcurl, ...) come too.
bundle_needs() {
  ldd "$1" | sed -n 's|^[[:space:]]*\([^ ]*\) => \(/.*\) (0x[0-9a-f]*)$|\1 \2|p' | while read -r soname path; do
    case "$soname" in
      ld-linux*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|libutil.so.*) continue ;;
      libcuda.so.*|libcudart.so.*|libcublas.so.*|libcublasLt.so.*|libcudnn*.so.*|libnccl.so.*|libnvrtc*.so.*) continue ;;
    esac
    [ -e "$stage/lib/$soname" ] && continue
    cp -L "$path" "$stage/lib/$soname"
    chmod u+w "$stage/lib/$soname"
    # Each library finds its own needs beside it (a binary's RUNPATH does not reach them).
    patchelf --set-rpath '$ORIGIN' "$stage/lib/$soname"
  done
}
bundle_needs "$build/distrain"
if [ -f "$build/libdistrain_cuda.so" ]; then
  cp "$build/libdistrain_cuda.so" "$stage/lib/"
  patchelf --set-rpath '$ORIGIN' "$stage/lib/libdistrain_cuda.so"
  bundle_needs "$build/libdistrain_cuda.so"
fi
cp "$here/bundle/distrain-gpu" "$stage/bin/distrain-gpu"
chmod +x "$stage/bin/distrain-gpu"
cp "$here/bundle/README" "$stage/README"
mkdir -p "$stage/recipes"
cp "$here/../recipes/"*.toml "$stage/recipes/"

mkdir -p "$out"
tar -C "$work" -czf "$out/$name.tar.gz" "$name"
echo "$out/$name.tar.gz"
