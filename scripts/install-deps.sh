#!/usr/bin/env bash
# Installs what distrain needs on Debian 12 (bookworm), from a bare system up: compiler,
# CMake, oneDNN (whose CMake config needs the OpenCL headers, only a Recommends of
# libdnnl-dev), HDF5, CLI11, toml++, fmt, nlohmann/json, doctest, OpenMPI, zlib, libpng and
# libjpeg-turbo (image folders), PCRE2 (the tokenizers' split patterns), patchelf
# (for `make bundle`), python3 (the bundle test runs bin/distrain-gpu's library finder),
# python3-venv (the TensorBoard test installs TensorBoard from PyPI into a virtual environment)
# and the Fashion-MNIST data set.
# CUDA, cuDNN and NCCL are optional: found in /usr/local/cuda when present.
set -euo pipefail
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
packages=(build-essential cmake pkg-config
  libdnnl-dev ocl-icd-opencl-dev libhdf5-dev libcli11-dev libtomlplusplus-dev libfmt-dev
  nlohmann-json3-dev doctest-dev libonnx-dev libprotobuf-dev libzip-dev libopenmpi-dev openmpi-bin zlib1g-dev libpng-dev libjpeg62-turbo-dev libpcre2-dev libsentencepiece-dev patchelf python3 python3-venv
  dataset-fashion-mnist)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
