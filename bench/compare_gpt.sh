#!/usr/bin/env bash
# GPT training speed: distrain bench next to PyTorch 2.x eager (bench/gpt_pytorch_reference.py)
# and llm.c's CPU reference train_gpt2.c, on the same threads, rounds interleaved (distrain,
# pytorch, llm.c, repeat) so that a busy machine slows all three alike. Two sizes:
#   gpt2_124m         recipes/gpt2_124m.toml: GPT-2 124M, batch 4 x 64 tokens (llm.c's setting)
#   shakespeare_char  recipes/shakespeare_char_gpt.toml: 4 layers, width 128, batch 12 x 64
#   llama_shakespeare recipes/llama_shakespeare.toml: its Llama at that size (no llm.c run)
# Prints per size the median tokens/s of each (and each run's), the ratios distrain/llm.c and
# distrain/pytorch, and each one's share of this machine's SGEMM peak (4096^3 fp32, best of 5,
# same threads: the faster of torch's MKL, which on AMD may keep to AVX2, and NumPy's
# OpenBLAS), counting 6N + 12 L T C FLOPs a token (N: the model's parameters,
# the tied table once; the same N for all three).
#   bench/compare_gpt.sh [BUILD_DIR] [THREADS] [ROUNDS]        (defaults: build 2 3)
#   SIZES=shakespeare_char bench/compare_gpt.sh                (one size; STEPS, WARMUP too)
#   PRECISION=bf16 bench/compare_gpt.sh                        (distrain's train.precision = "bf16"
#                                                              against torch.autocast(cpu, bfloat16); no llm.c)
#   COMPILE=1 bench/compare_gpt.sh                             (also PyTorch with torch.compile, its
#                                                              compilation inside its warm-up steps)
#   BUSY=1 bench/compare_gpt.sh                                (each round also beside BUSY other ML jobs:
#                                                              bench/cpu_load.py, a PyTorch matrix product loop on
#                                                              THREADS threads; the same load for all three; quiet and
#                                                              busy tables, and what share of quiet each keeps)
#
# llm.c is not built here (this repository carries none of its code, binaries or build
# scripts). Build it yourself from https://github.com/karpathy/llm.c with its own Makefile,
# `make train_gpt2` (-Ofast -march=native -fopenmp; check that it says "OpenMP found"), and
# pass the binary:
#   LLMC_BIN=/path/to/llm.c/train_gpt2                 used for both sizes (main() has B=4)
#   LLMC_BIN_SHAKESPEARE=/path/to/copy/train_gpt2      optional: a build with `int B = 12;`
#                                                      in main(), for shakespeare_char's batch
# Without them the llm.c column is skipped. train_gpt2 reads gpt2_124M.bin and the Tiny
# Shakespeare token files from its working directory: bench/llmc_files.py writes them (random
# GPT-2-initialised weights of the size, random tokens) into a temporary directory; the
# binary is stopped after step 19 at the latest (step 20 samples text), and its steps
# before WARMUP are warm-up like the others' (its validation passes are outside its timer).
#
# The references run in the virtual environment bench/.venv-gpt, made on first use with
# `python3 -m venv` (Debian: apt-get install -y python3-venv) and pip: torch from PyPI (the
# CUDA build, several GB with its nvidia-* wheels; it runs on the CPU) and numpy.
# For figures only: distrain never depends on Python.
set -euo pipefail
build=${1:-${BUILD_DIR:-build}}
threads=${2:-${THREADS:-2}}
rounds=${3:-${ROUNDS:-3}}
sizes=${SIZES:-gpt2_124m shakespeare_char}
precision=${PRECISION:-float32}
busy=${BUSY:-0}
compile=${COMPILE:-0}
loads=quiet
[ "$busy" -gt 0 ] && loads="quiet busy"
case $precision in
  float32) ;;
  bf16) # llm.c's CPU trainer is float32 only: no column for it.
    unset LLMC_BIN LLMC_BIN_SHAKESPEARE ;;
  *) echo "error: PRECISION=$precision: float32 or bf16" >&2; exit 1 ;;
esac
here=$(cd "$(dirname "$0")/.." && pwd)
venv=$here/bench/.venv-gpt
python=$venv/bin/python
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads  # the latter: NumPy's, in the peak

bin=$here/$build/distrain
[ -x "$bin" ] || { echo "error: $bin not found: build distrain first (BUILD_DIR)" >&2; exit 1; }
for size in $sizes; do
  case $size in
    gpt2_124m) recipe=$here/recipes/gpt2_124m.toml ;;
    shakespeare_char) recipe=$here/recipes/shakespeare_char_gpt.toml ;;
    llama_shakespeare) recipe=$here/recipes/llama_shakespeare.toml ;;
    *) echo "error: unknown size '$size' (SIZES: gpt2_124m, shakespeare_char, llama_shakespeare)" >&2; exit 1 ;;
  esac
  [ -f "$recipe" ] || { echo "error: recipe $recipe not found" >&2; exit 1; }
done

# The references' environment, made and filled once.
if ! [ -x "$python" ] || ! "$python" -c 'import torch, numpy' 2>/dev/null; then
  echo "setting up $venv (torch from PyPI, several GB; once, minutes)" >&2
  start=$(date +%s)
  python3 -m venv "$venv" || { echo "error: python3 -m venv failed (apt-get install -y python3-venv)" >&2; exit 1; }
  "$python" -m pip install -q --upgrade pip
  "$python" -m pip install -q torch numpy || { echo "error: pip install torch numpy failed" >&2; exit 1; }
  echo "installed $("$python" -c 'import torch; print("torch", torch.__version__)') in $(($(date +%s) - start)) s" >&2
fi

# llm.c's binaries, if given; a name given but not runnable is an error, not a skip.
for var in LLMC_BIN LLMC_BIN_SHAKESPEARE; do
  if [ -n "${!var:-}" ] && ! [ -x "${!var}" ]; then
    echo "error: $var=${!var} is not an executable file" >&2; exit 1
  fi
done
if [ -z "${LLMC_BIN:-}${LLMC_BIN_SHAKESPEARE:-}" ]; then
  echo "llm.c: no LLMC_BIN given (a train_gpt2 built with llm.c's Makefile), skipping its column"
fi
command -v stdbuf >/dev/null || { echo "error: stdbuf (coreutils) not found: needed to read llm.c's steps as they come" >&2; exit 1; }

tmp=$(mktemp -d)
load_pids=()
# start_load quiet|busy: with busy, $busy other ML jobs on the same cores, given time to start.
start_load() {
  [ "$1" = busy ] || return 0
  for _ in $(seq "$busy"); do "$python" "$here/bench/cpu_load.py" "$threads" & load_pids+=($!); done
  sleep 2
}
stop_load() {
  [ ${#load_pids[@]} -eq 0 ] && return 0
  kill "${load_pids[@]}" 2>/dev/null || true
  wait "${load_pids[@]}" 2>/dev/null || true  # killed: non-zero, expected
  load_pids=()
}
trap 'stop_load; rm -rf "$tmp"' EXIT

# One llm.c run: reads its step lines as they come, stops it after the last timed one.
# Prints a JSON line: tokens/s from the median step, the batch it ran (from its batch count).
cat >"$tmp/llmc_run.py" <<'PY'
import json, re, statistics, subprocess, sys, threading
binary, workdir, warm, last, train_tokens, seq, timeout = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:8])
proc = subprocess.Popen(["stdbuf", "-oL", binary], cwd=workdir, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True)
lines, steps, info = [], {}, {}
watchdog = threading.Timer(timeout, proc.kill)  # a silent hang ends too
watchdog.start()
try:
    for line in proc.stdout:
        lines.append(line.rstrip())
        if m := re.match(r"(num_parameters|train dataset num_batches): (\d+)", line):
            info[m[1]] = int(m[2])
        elif m := re.match(r"step (\d+): train loss ([-\d.naif]+) \(took ([\d.]+) ms\)", line):
            steps[int(m[1])] = (float(m[2]), float(m[3]))
            if int(m[1]) >= last:
                break
finally:
    watchdog.cancel()
    proc.kill()
    proc.wait()
if last not in steps or "train dataset num_batches" not in info:
    sys.exit(f"error: llm.c stopped before step {last} (exit {proc.returncode}, time limit {timeout} s): "
             + " | ".join(lines[-5:]))
# train_gpt2 prints tokens // (B*T): the B that gives back that count.
batches = info["train dataset num_batches"]
found = [b for b in range(1, 1025) if train_tokens // (b * seq) == batches]
if len(found) != 1:
    sys.exit(f"error: cannot tell llm.c's batch from {batches} batches of {train_tokens} tokens (T must be {seq})")
ms = [steps[s][1] for s in range(warm, last + 1)]
med = statistics.median(ms)
print(json.dumps({"batch": found[0], "tokens_per_sec": found[0] * seq / med * 1e3, "step_ms_median": med,
                  "first_loss": steps[0][0], "parameters": info.get("num_parameters"), "timed_steps": len(ms)}))
PY

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //'), load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null); $threads threads each"
peak1=$("$python" "$here/bench/gpt_pytorch_reference.py" --sgemm-peak --threads "$threads")

for size in $sizes; do
  if [ "$size" = gpt2_124m ]; then
    recipe=$here/recipes/gpt2_124m.toml; steps=${STEPS:-8}; warmup=${WARMUP:-2}; llmc=${LLMC_BIN:-}
  elif [ "$size" = llama_shakespeare ]; then
    recipe=$here/recipes/llama_shakespeare.toml; steps=${STEPS:-40}; warmup=${WARMUP:-5}; llmc=""
  else
    recipe=$here/recipes/shakespeare_char_gpt.toml; steps=${STEPS:-40}; warmup=${WARMUP:-5}
    llmc=${LLMC_BIN_SHAKESPEARE:-${LLMC_BIN:-}}
  fi
  # llm.c validates at steps 0, 10, 20 (outside its timer) but samples at step 20, and with
  # no tokenizer file that reads an unset token: stop at step 19 at the latest.
  lwarm=$(( warmup < 1 ? 1 : (warmup > 18 ? 18 : warmup) ))
  llast=$(( lwarm + steps - 1 > 19 ? 19 : lwarm + steps - 1 ))
  if [ -n "$llmc" ]; then
    mkdir -p "$tmp/$size"
    "$python" "$here/bench/llmc_files.py" --size "$size" --dir "$tmp/$size" >"$tmp/$size.files.json"
  fi
  for load in $loads; do
    for name in distrain pytorch compiled llmc; do : >"$tmp/$size.$load.$name"; done
  done
  for _ in $(seq "$rounds"); do
    for load in $loads; do
      start_load "$load"
      # distrain bench reads no data (random token windows); run from the root all the same.
      (cd "$here" && "$bin" bench "$recipe" --steps "$steps" --warmup "$warmup" --set "train.precision=\"$precision\"" --json) |
        tail -n 1 >>"$tmp/$size.$load.distrain"
      "$python" "$here/bench/gpt_pytorch_reference.py" --size "$size" --threads "$threads" --precision "$precision" \
        --steps "$steps" --warmup "$warmup" | tail -n 1 >>"$tmp/$size.$load.pytorch"
      if [ "$compile" = 1 ]; then
        "$python" "$here/bench/gpt_pytorch_reference.py" --size "$size" --threads "$threads" --precision "$precision" \
          --steps "$steps" --warmup "$warmup" --compile | tail -n 1 >>"$tmp/$size.$load.compiled"
      fi
      if [ -n "$llmc" ]; then
        train_tokens=$("$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["train_tokens"])' "$tmp/$size.files.json")
        "$python" "$tmp/llmc_run.py" "$llmc" "$tmp/$size" "$lwarm" "$llast" "$train_tokens" 64 \
          "${LLMC_TIMEOUT:-900}" >>"$tmp/$size.$load.llmc"
      fi
      stop_load
    done
  done
  rm -rf "${tmp:?}/$size"  # the 124M checkpoint is 0.5 GB
  for load in $loads; do
  "$python" - "$size" "$threads" "$rounds" "$steps" "$warmup" "$lwarm" "$llast" "$peak1" "$tmp" "$precision" "$load" "$busy" <<'PY'
import json, math, statistics, sys
size, threads, rounds, steps, warmup, lwarm, llast, peak, tmp, precision, load, busy = sys.argv[1:]
peak = json.loads(peak)["gflops"]
runs = {name: [json.loads(l) for l in open(f"{tmp}/{size}.{load}.{name}") if l.strip()]
        for name in ("distrain", "pytorch", "compiled", "llmc")}
quiet = None
if load == "busy":  # each one's quiet median, for the share it keeps
    quiet = {}
    for name in runs:
        rs = [json.loads(l) for l in open(f"{tmp}/{size}.quiet.{name}") if l.strip()]
        if rs:
            quiet[name] = statistics.median(r["images_per_sec"] * r["tokens_per_example"] if name == "distrain"
                                            else r["tokens_per_sec"] for r in rs)
for r in runs["distrain"]:
    r["tokens_per_sec"] = r["images_per_sec"] * r["tokens_per_example"]
    r["step_ms_median"] = r["step_ms"]["median"]
    r["batch"] = r["global_batch"]
    r["parameters"] = r["memory_per_replica"]["parameters"] // 4
ref = runs["pytorch"][0]
N, batch, seq = ref["parameters"], ref["batch"], ref["seq"]
L, C = {"gpt2_124m": (12, 768), "shakespeare_char": (4, 128), "llama_shakespeare": (4, 128)}[size]  # layers, width
flops = 6 * N + 12 * L * seq * C
where = "quiet" if load == "quiet" else f"beside {busy} other job(s) (bench/cpu_load.py, {threads} threads each)"
print(f"{size} in {precision}, {where}: batch {batch} x {seq} tokens, {threads} threads, {rounds} round(s); N = {N:,} parameters, "
      f"{flops / 1e6:.1f} MFLOP a token (6N + 12 L T C); SGEMM peak {peak:.0f} GFLOP/s")
if runs["distrain"][0]["parameters"] != N or runs["distrain"][0]["batch"] != batch:
    print(f"  note: distrain's recipe has {runs['distrain'][0]['parameters']:,} parameters, batch {runs['distrain'][0]['batch']}")
names = {"distrain": f"distrain   ({steps} steps after {warmup})", "pytorch": f"pytorch    ({steps} steps after {warmup})",
         "compiled": f"compiled   ({steps} steps after {warmup})", "llmc": f"llm.c      (steps {lwarm}-{llast})"}
med = {}
for name, rs in runs.items():
    if not rs:
        if name == "llmc":
            print(f"  {names[name].split()[0]:<10} skipped (no LLMC_BIN)")
        continue
    tps = [r["tokens_per_sec"] for r in rs]
    med[name] = m = statistics.median(tps)
    ms = statistics.median(r["step_ms_median"] for r in rs)
    extra = f", batch {rs[0]['batch']} (not {batch})" if rs[0]["batch"] != batch else ""
    kept = f", {m / quiet[name]:.0%} of quiet" if quiet and name in quiet else ""
    print(f"  {names[name]:<32} {m:9.1f} tokens/s  (runs {', '.join(f'{x:.1f}' for x in tps)})  "
          f"step {ms:.1f} ms  {m * flops / 1e9:6.1f} GFLOP/s = {m * flops / 1e9 / peak:5.1%} of the fp32 peak{extra}{kept}")
ratios = [f"distrain/{n} {med['distrain'] / med[n]:.2f}x" for n in ("llmc", "pytorch", "compiled") if n in med]
print("  " + "   ".join(r.replace("llmc", "llm.c").replace("compiled", "torch.compile") for r in ratios))
losses = [f"{n} {runs[n][0]['first_loss']:.3f}" for n in ("pytorch", "llmc") if runs[n]]
vocab = {"gpt2_124m": 50257, "shakespeare_char": 65, "llama_shakespeare": 65}[size]
print(f"  first train loss: {', '.join(losses).replace('llmc', 'llm.c')} (ln V = {math.log(vocab):.3f})")
PY
  done
done
peak2=$("$python" "$here/bench/gpt_pytorch_reference.py" --sgemm-peak --threads "$threads")
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
"$python" - "$peak1" "$peak2" <<'PY'
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:])
def one(p):
    return f"{p['gflops']:.0f} GFLOP/s (torch {p['torch_gflops']:.0f}" + (f", numpy {p['numpy_gflops']:.0f})" if "numpy_gflops" in p else ")")
print(f"SGEMM peak ({a['n']}^3 fp32, best of 5, {a['threads']} threads; torch {a['torch']}"
      + (f", numpy {a['numpy']}" if "numpy" in a else "") + f"): {one(a)} before the runs, {one(b)} after; "
      "the shares use the first")
PY
