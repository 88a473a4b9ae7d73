#!/usr/bin/env bash
# docs/hdf5_data.md's examples, as written there: hdf5_docs.sh DISTRAIN SOURCE_DIR
# Its Python blocks (NumPy and h5py only) write fmnist.h5 from the installed Fashion-MNIST
# IDX files and blobs.h5 from random points; distrain trains on each (the Fashion-MNIST
# recipe for 5 steps instead of its 10 epochs, the blobs recipe as written, which must
# learn its three classes). h5py is the system's where Debian's python3-h5py is installed,
# else from PyPI into a virtual environment cached under /tmp; without either the test
# prints "[skipped] why" and exits 77 (ctest: skipped).
set -u
distrain=$1
src=$2
doc=$src/docs/hdf5_data.md
work=$(mktemp -d "${TMPDIR:-/tmp}/distrain_e2e_hdf5_docs.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1"; failed=$((failed + 1)); }
skip() {
  echo "[skipped] $1"
  exit 77
}

python=python3
if ! python3 -c 'import h5py, numpy' 2>/dev/null; then
  venv=${DISTRAIN_H5PY_VENV:-/tmp/distrain_h5py_venv}
  exec 9>"$venv.lock"
  flock 9  # parallel ctest runs share the cached environment
  if ! "$venv/bin/python" -c 'import h5py, numpy' 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" >"$work/venv.log" 2>&1 || skip "no h5py (apt-get install python3-h5py) and python3 -m venv failed"
    "$venv/bin/pip" install --disable-pip-version-check --timeout 20 --retries 1 -q h5py numpy >"$work/pip.log" 2>&1 ||
      { rm -rf "$venv"; skip "no h5py (apt-get install python3-h5py) and pip could not install it: $(grep -m 1 -E 'ERROR|Error' "$work/pip.log")"; }
  fi
  python=$venv/bin/python
fi
[ -d /usr/share/datasets/fashion-mnist ] || skip "no /usr/share/datasets/fashion-mnist (the README's set-up installs dataset-fashion-mnist)"

# block LANG K: the K-th ```LANG block of the document.
block() { awk -v lang="$1" -v k="$2" '$0 == "```" lang { n++; inside = (n == k); next } /^```/ { inside = 0 } inside' "$doc"; }
cd "$work" || exit 1

block python 1 >fmnist.py
if "$python" fmnist.py >fmnist.log 2>&1 && [ -f fmnist.h5 ]; then ok "the first example writes fmnist.h5"; else bad "fmnist.py: $(tail -n 2 fmnist.log)"; fi
if (cd "$src" && "$distrain" train recipes/fashion_mnist_cnn.toml --set data.dataset=hdf5 --set "data.path=\"$work/fmnist.h5\"" \
  --set train.steps=5 --set train.validate=false --progress none --run-dir "$work/fmnist_run") >fmnist_train.log 2>&1 &&
  [ -f fmnist_run/ckpt-000005.h5 ]; then
  ok "recipes/fashion_mnist_cnn.toml trains on fmnist.h5"
else
  bad "train on fmnist.h5: $(tail -n 2 fmnist_train.log)"
fi

block python 2 >blobs.py
block toml 1 >blobs.toml
if "$python" blobs.py >blobs.log 2>&1 && [ -f blobs.h5 ]; then ok "the second example writes blobs.h5"; else bad "blobs.py: $(tail -n 2 blobs.log)"; fi
if "$distrain" train blobs.toml --progress none >blobs_train.log 2>&1; then
  accuracy=$(sed -n 's/^done: .*test accuracy \([0-9.]*\).*/\1/p' blobs_train.log)
  awk -v a="${accuracy:-0}" 'BEGIN { exit !(a >= 0.9) }' && ok "blobs.toml as written learns the three classes (test accuracy $accuracy)" ||
    bad "blobs.toml: test accuracy '${accuracy}': $(tail -n 1 blobs_train.log)"
else
  bad "train blobs.toml: $(tail -n 2 blobs_train.log)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
