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
cp "$build/libdistrain_sentencepiece.so" "$stage/lib/"
patchelf --set-rpath '$ORIGIN' "$stage/lib/libdistrain_sentencepiece.so"
bundle_needs "$build/libdistrain_sentencepiece.so"
if [ -f "$build/libdistrain_cuda.so" ]; then
  cp "$build/libdistrain_cuda.so" "$stage/lib/"
  patchelf --set-rpath '$ORIGIN' "$stage/lib/libdistrain_cuda.so"
  bundle_needs "$build/libdistrain_cuda.so"
fi
# Open MPI's launcher with the components a single machine needs (shared memory, TCP,
# the launch and PMIx plumbing), when the build machine has Open MPI 4: multi-worker runs
# on hosts without it. Components that need fabric libraries (UCX, libfabric, PSM, verbs)
# stay out; Open MPI skips what it does not find.
bundle_mpi() {
  local orterun pkglib pmixlib
  orterun=$(command -v orterun || true)
  pkglib=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/openmpi/lib/openmpi3
  pmixlib=$(dirname "$pkglib")/../../pmix2/lib/pmix
  [ -n "$orterun" ] && [ -d "$pkglib" ] && [ -d /usr/share/openmpi ] || {
    echo "make-bundle: no Open MPI 4 runtime here (openmpi-bin); the bundle carries libmpi only" >&2
    return 0
  }
  mkdir -p "$stage/mpi/bin" "$stage/mpi/lib/openmpi3" "$stage/mpi/lib/pmix" "$stage/mpi/share" "$stage/mpi/etc"
  for exe in orterun orted; do
    cp -L "$(dirname "$orterun")/$exe" "$stage/mpi/bin/$exe"
    patchelf --set-rpath '$ORIGIN/../../lib' "$stage/mpi/bin/$exe"
    bundle_needs "$stage/mpi/bin/$exe"
  done
  local c
  for c in "$pkglib"/*.so; do
    ldd "$c" | grep -qE 'libuc[ptsm]|libfabric|libpsm|libibverbs|librdmacm|libinfinipath|liboshmem|libefa|libjvm|not found' &&
      continue
    cp -L "$c" "$stage/mpi/lib/openmpi3/"
    patchelf --set-rpath '$ORIGIN/../../../lib' "$stage/mpi/lib/openmpi3/$(basename "$c")"
    bundle_needs "$c"
  done
  for c in "$pmixlib"/*.so; do
    ldd "$c" | grep -q 'not found' && continue
    cp -L "$c" "$stage/mpi/lib/pmix/"
    patchelf --set-rpath '$ORIGIN/../../../lib' "$stage/mpi/lib/pmix/$(basename "$c")"
    bundle_needs "$c"
  done
  cp -r /usr/share/openmpi "$stage/mpi/share/openmpi"
  [ -d "$pmixlib/../../share/pmix" ] && cp -r "$pmixlib/../../share/pmix" "$stage/mpi/share/pmix"
  cp /etc/openmpi/openmpi-mca-params.conf "$stage/mpi/etc/" 2>/dev/null || : >"$stage/mpi/etc/openmpi-mca-params.conf"
  : >"$stage/mpi/etc/openmpi-default-hostfile"
  cp "$here/bundle/mpirun" "$stage/bin/mpirun"
  chmod +x "$stage/bin/mpirun"
}
bundle_mpi
cp "$here/bundle/distrain-gpu" "$stage/bin/distrain-gpu"
chmod +x "$stage/bin/distrain-gpu"
cp "$here/bundle/README" "$stage/README"
mkdir -p "$stage/recipes"
cp "$here/../recipes/"*.toml "$stage/recipes/"
# The data the recipes name by a relative path (data/tiny_shakespeare.txt), beside them.
mkdir -p "$stage/data"
cp "$here/../data/"* "$stage/data/"

mkdir -p "$out"
tar -C "$work" -czf "$out/$name.tar.gz" "$name"
echo "$out/$name.tar.gz"
