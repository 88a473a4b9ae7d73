#!/usr/bin/env bash
# The relocatable bundle (make bundle): bundle_test.sh BUILD_DIR SOURCE_DIR
# Builds it, unpacks it under a path with a space, and checks that it runs with an empty
# environment, that every library it loads comes from its lib/ (but glibc and the CUDA
# libraries), that the executable links no CUDA library and trains on the CPU where the
# CUDA plugin cannot load (and names the missing library when a GPU is asked for), and
# that bin/distrain-gpu adds a PyTorch installation's libraries only when they are
# missing, and that the bundle's bin/mpirun runs workers with its own Open MPI components.
# Prints "N passed, N failed".
set -u
build=$1
src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/distrain_bundle.XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}

if ! tarball=$(bash "$src/scripts/make-bundle.sh" "$build" "$work/dist" 2>"$work/err"); then
  bad "make-bundle.sh: $(cat "$work/err")"
  finish
fi
case "$(basename "$tarball")" in
  distrain-*-linux-*.tar.gz) ok "tarball named $(basename "$tarball")" ;;
  *) bad "unexpected tarball name $tarball" ;;
esac

root="$work/un packed"
mkdir -p "$root"
tar -C "$root" -xzf "$tarball"
dir=$(find "$root" -mindepth 1 -maxdepth 1 -type d)
exe="$dir/bin/distrain"
[ -x "$exe" ] && [ -x "$dir/bin/distrain-gpu" ] && [ -f "$dir/recipes/fashion_mnist_cnn.toml" ] &&
  [ -f "$dir/data/tiny_shakespeare.txt" ] &&
  ok "bin/distrain, bin/distrain-gpu, recipes/ and data/ present" || bad "bundle layout: $(cd "$dir" && find . | head -20)"

# Every resolved library is in the bundle, or is glibc / CUDA (which stay the host's).
outside=$(ldd "$exe" | sed -n 's|^[[:space:]]*\([^ ]*\) => \(/.*\) (0x[0-9a-f]*)$|\1 \2|p' | while read -r soname path; do
  case "$path" in "$dir/lib/"*|"$dir/bin/../lib/"*) continue ;; esac
  case "$soname" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*) ;;
    libcublas.so.*|libcublasLt.so.*|libcudnn*.so.*|libnccl.so.*) ;;
    *) echo "$soname=$path" ;;
  esac
done)
[ -z "$outside" ] && ok "every non-system library resolves inside lib/" || bad "resolved outside the bundle: $outside"
for banned in libc.so.6 libcudnn.so.9 libnccl.so.2; do
  [ ! -e "$dir/lib/$banned" ] && ok "$banned not bundled" || bad "$banned is in lib/"
done
cuda_linked=$(ldd "$exe" | grep -E "libcuda|libcudart|libcublas|libcudnn|libnccl")
[ -z "$cuda_linked" ] && ok "bin/distrain links no CUDA library" || bad "bin/distrain links: $cuda_linked"
plugin="$dir/lib/libdistrain_cuda.so"
if [ -f "$build/libdistrain_cuda.so" ]; then
  [ -f "$plugin" ] && ok "the CUDA plugin is in lib/" || bad "the build has libdistrain_cuda.so, the bundle does not"
else
  [ ! -f "$plugin" ] && ok "a build without CUDA bundles no plugin" || bad "lib/libdistrain_cuda.so in a build without CUDA"
fi

# Runs with an empty environment, trains and evaluates.
cat >"$work/tiny.toml" <<'TOML'
name = "tiny"
seed = 5
[data]
dataset = "synthetic"
train_examples = 128
test_examples = 64
image_shape = [8, 8, 1]
[model]
input_shape = [8, 8, 1]
[[model.layers]]
type = "conv2d"
filters = 2
kernel_size = 3
[[model.layers]]
type = "flatten"
[[model.layers]]
type = "dense"
units = 10
[strategy]
per_replica_batch = 32
[train]
epochs = 1
TOML
if env -i PATH=/usr/bin:/bin OMP_NUM_THREADS=1 "$exe" info >"$work/info" 2>&1 && grep -q "^distrain " "$work/info"; then
  ok "info runs with an empty environment"
else
  bad "info: $(head -c 400 "$work/info")"
fi
# The SentencePiece plugin and its libraries come from the bundle's lib/, in a namespace of their own.
if env -i PATH=/usr/bin:/bin "$exe" tokenizer train "$dir/data/tiny_shakespeare.txt" --vocab 500 --out "$work/sp.model" >"$work/sp" 2>&1 &&
  env -i PATH=/usr/bin:/bin LD_DEBUG=libs "$exe" tokenize --tokenizer "$work/sp.model" --count "$dir/data/tiny_shakespeare.txt" \
    >"$work/spcount" 2>"$work/splibs" && grep -q "tokens, 1115394 bytes" "$work/spcount" &&
  grep -q "calling init: $dir/lib/libsentencepiece.so.0" "$work/splibs"; then
  ok "tokenizer train and tokenize from the bundle (its own libsentencepiece)"
else
  bad "SentencePiece from the bundle: $(tail -c 300 "$work/sp") $(cat "$work/spcount" 2>/dev/null) $(grep -m 2 sentencepiece "$work/splibs")"
fi
if env -i PATH=/usr/bin:/bin OMP_NUM_THREADS=1 "$exe" train "$work/tiny.toml" --run-dir "$work/run" >"$work/train" 2>&1 &&
  env -i PATH=/usr/bin:/bin OMP_NUM_THREADS=1 "$exe" eval --ckpt "$work/run/ckpt-000004.h5" --json >"$work/eval" 2>&1 &&
  grep -q '"accuracy"' "$work/eval"; then
  ok "train and eval from the bundle"
else
  bad "train/eval from the bundle: $(tail -c 400 "$work/train") $(cat "$work/eval" 2>/dev/null)"
fi

# Multi-worker training through the bundle's own Open MPI launcher (bin/mpirun), whose
# components come from the bundle's mpi/, not from an Open MPI the host may have.
if [ -x "$dir/bin/mpirun" ]; then
  mpirun=("$dir/bin/mpirun" --allow-run-as-root --oversubscribe)
  if env -i PATH=/usr/bin:/bin OMP_NUM_THREADS=1 "${mpirun[@]}" -np 2 "$exe" train "$work/tiny.toml" \
    --set strategy.name=multi_worker_mirrored --set strategy.per_replica_batch=16 --run-dir "$work/run_mpi" >"$work/mpi" 2>&1 &&
    [ -f "$work/run_mpi/ckpt-000004.h5" ]; then
    ok "2 workers under the bundle's bin/mpirun, empty environment"
  else
    bad "bin/mpirun -np 2: $(tail -c 600 "$work/mpi")"
  fi
  # The launcher's loaded components, seen from the process it starts (its child).
  env -i PATH=/usr/bin:/bin "${mpirun[@]}" -np 1 /bin/sh -c 'cat /proc/$PPID/maps' >"$work/maps" 2>&1
  foreign=$(awk '{ $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print }' "$work/maps" | grep '/mca_[a-z0-9_]*\.so$' |
    grep -v "^$dir/" | sort -u)
  grep -q "$dir/mpi/lib/openmpi3/mca_" "$work/maps" && [ -z "$foreign" ] &&
    ok "bin/mpirun loads its components from the bundle" || bad "bin/mpirun components: ${foreign:-none from the bundle}"
else
  ok "no bin/mpirun: the build machine has no Open MPI runtime to carry"
fi

# A host without the CUDA libraries: a copy whose plugin needs a cuDNN that exists nowhere
# (or, from a build without CUDA, no plugin at all). CPU training still runs; a cuda device
# stops with exit 2 and the reason.
nocuda="$work/nocuda"
cp -r "$dir" "$nocuda"
info_says="not built" error_says="no CUDA plugin"
if [ -f "$nocuda/lib/libdistrain_cuda.so" ]; then
  info_says=libdistrain_absent_cudnn.so.9 error_says=libdistrain_absent_cudnn.so.9
  patchelf --replace-needed libcudnn.so.9 libdistrain_absent_cudnn.so.9 "$nocuda/lib/libdistrain_cuda.so"
fi
env -i PATH=/usr/bin:/bin OMP_NUM_THREADS=1 "$nocuda/bin/distrain" info >"$work/info" 2>&1
rc=$?
[ "$rc" -eq 0 ] && grep -q "$info_says" "$work/info" && ok "info without CUDA libraries says why: $(grep -m1 -E 'CUDA' "$work/info")" ||
  bad "info without CUDA libraries: exit $rc, $(cat "$work/info")"
env -i PATH=/usr/bin:/bin OMP_NUM_THREADS=1 "$nocuda/bin/distrain" train "$work/tiny.toml" --run-dir "$work/run_nocuda" >"$work/train" 2>&1 &&
  [ -f "$work/run_nocuda/ckpt-000004.h5" ] && ok "CPU training without CUDA libraries" || bad "CPU training without CUDA: $(tail -c 400 "$work/train")"
env -i PATH=/usr/bin:/bin OMP_NUM_THREADS=1 "$nocuda/bin/distrain" train "$work/tiny.toml" --run-dir "$work/run_gpu" \
  --set 'strategy.devices=["cuda:0"]' >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "cuda:0" "$work/err" && grep -q "$error_says" "$work/err" &&
  ok "a cuda device without CUDA libraries: exit 2, $(cat "$work/err")" || bad "cuda device without CUDA: exit $rc, $(cat "$work/err")"

# distrain-gpu: with every library present it changes nothing.
if "$dir/bin/distrain-gpu" --version | grep -q "^distrain "; then ok "distrain-gpu runs distrain"; else bad "distrain-gpu --version"; fi

# distrain-gpu with a library only a (fake) PyTorch installation holds: a copy of the
# bundle whose executable also needs libdistrain_fake.so.1, found under nvidia/*/lib.
fake="$work/fake"
cp -r "$dir" "$fake"
mkdir -p "$work/site/nvidia/fakelib/lib"
echo 'int distrain_fake_symbol(void) { return 1; }' >"$work/fake.c"
cc -shared -fPIC -Wl,-soname,libdistrain_fake.so.1 -o "$work/site/nvidia/fakelib/lib/libdistrain_fake.so.1" "$work/fake.c"
patchelf --add-needed libdistrain_fake.so.1 "$fake/bin/distrain"
if ! "$fake/bin/distrain" --version >/dev/null 2>&1; then ok "the patched copy cannot start on its own"; else bad "patched copy started without its library"; fi
if env PYTHONPATH="$work/site" "$fake/bin/distrain-gpu" --version 2>&1 | grep -q "^distrain "; then
  ok "distrain-gpu adds the library PyTorch's nvidia packages hold"
else
  bad "distrain-gpu with the fake nvidia package: $(env PYTHONPATH="$work/site" "$fake/bin/distrain-gpu" --version 2>&1 | head -c 400)"
fi
env PYTHONPATH="$work/site" "$fake/bin/distrain-gpu" --library-path | grep -q "nvidia/fakelib/lib" &&
  ok "--library-path names the directory" || bad "--library-path: $(env PYTHONPATH="$work/site" "$fake/bin/distrain-gpu" --library-path)"
env DISTRAIN_PYTHON=/bin/false "$fake/bin/distrain-gpu" --version >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" -eq 2 ] && grep -q "libdistrain_fake.so.1" "$work/err" && grep -q "DISTRAIN_PYTHON" "$work/err" &&
  ok "without PyTorch it names the missing library and exits 2" || bad "missing library: exit $rc, $(cat "$work/err")"

finish
