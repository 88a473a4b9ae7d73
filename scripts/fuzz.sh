#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan, -DDISTRAIN_FUZZ=ON,
# build-fuzz/) and runs each for SECONDS on its committed seed corpus
# tests/fuzz/corpus/<target>/. New inputs go to build-fuzz/corpus/<target>/ (the
# committed corpus stays small; add an input there by hand when it matters). Any crash,
# sanitizer report, timeout or out-of-memory fails the script and leaves the input in
# build-fuzz/artifacts/: copy it to tests/fuzz/regressions/<target>/ (replayed by the unit
# test "fuzz regressions" in tests/unit/test_bad_input.cpp and by every run here) and fix it.
# fuzz_sentencepiece feeds .model files to SentencePiece's own reader in its plugin, which
# is not instrumented (a namespace of its own): its crashes are caught, without coverage.
# Needs clang, libclang-rt-14-dev (libFuzzer) and libomp-dev; used by .ci/run.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
#   scripts/fuzz.sh --seed                   rewrite fuzz_checkpoint_bytes's seed checkpoint
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${DISTRAIN_FUZZ_BUILD:-$repo/build-fuzz}
jobs=${JOBS:-$(nproc)}
seconds=${1:-60}
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DDISTRAIN_CUDA=OFF -DDISTRAIN_FUZZ=ON >/dev/null
cmake --build "$build" -j "$jobs"
corpus=$repo/tests/fuzz/corpus
regressions=$repo/tests/fuzz/regressions  # inputs that once crashed: replayed first
if [ "$seconds" = "--seed" ]; then
  DISTRAIN_FUZZ_WRITE_SEED="$corpus/fuzz_checkpoint_bytes/seed.h5" "$build/fuzz_checkpoint"
  exit 0
fi
# allocator_may_return_null: HDF5 mallocs sizes read from a corrupt file (2^62 bytes) and
# handles NULL as an error, as it gets in production; C++ new still reports such a size.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMP_NUM_THREADS=1
export DISTRAIN_SENTENCEPIECE_PLUGIN=$build/libdistrain_sentencepiece.so
declare -A max_len=([fuzz_recipe]=4096 [fuzz_idx]=512 [fuzz_checkpoint]=16384 [fuzz_images]=4096 [fuzz_tokenizer]=8192 [fuzz_safetensors]=4096 [fuzz_sentencepiece]=16384)
status=0
summary=()
for target in fuzz_recipe fuzz_idx fuzz_checkpoint fuzz_images fuzz_tokenizer fuzz_safetensors fuzz_sentencepiece; do
  mkdir -p "$build/corpus/$target" "$build/artifacts"
  log=$build/$target.log
  echo "== $target: ${seconds} s on tests/fuzz/corpus/$target" >&2
  rc=0
  mkdir -p "$regressions/$target"
  "$build/$target" "$build/corpus/$target" "$corpus/$target" "$regressions/$target" -max_total_time="$seconds" -max_len="${max_len[$target]}" \
    -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/$target-" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE)' "$log" | tail -1 || true)
  summary+=("$target: ${runs:-?} executions in ${seconds} s, rc $rc | ${line}")
  if [ "$rc" -ne 0 ]; then
    status=1
    tail -60 "$log" >&2
    echo "== $target FAILED: input in $build/artifacts/$target-*" >&2
  fi
done
printf '%s\n' "${summary[@]}"
exit $status
