#!/usr/bin/env bash
# The many-core speed run behind the README's 16-thread figures, in one go:
# what the machine is, the access-pattern probe (nibble_access_probe), then
# `nibble bench` over every layout and output type at each thread count
# (threads pinned one per core), then `nibble dequant` of a 3 GiB checkpoint
# against `cp` of its output, then a second sweep of the two ends.
#
#   bench/multicore_sweep.sh BUILD OUTDIR [THREADS] [SECONDS]
#
# BUILD: a build folder (nibble, nibble_access_probe, tests/make_checkpoints;
# a missing one skips its step); OUTDIR: where machine.txt, probe.txt,
# sweep1.{json,txt}, dequant.txt and sweep2.{json,txt} go; THREADS: thread
# counts (default 1,2,4,8,16); SECONDS: the time the whole run may take
# (default 480): a step starts only if the time left allows it.
# STEPS (environment): the steps to run, default "probe sweep1 dequant sweep2";
# "ab" (first when named) alternates BUILD's nibble with the build AB_BASE
# names (a nibble binary) over AB_LAYOUTS x AB_DTYPES at 1 and the last
# thread count, AB_ROUNDS times (default 2), into ab-base.csv / ab-new.csv
# (`nibble bench --format csv`, each line prefixed with its round).
# SWEEP_LAYOUTS (environment): layouts of the sweeps (default: the 25 of
# the issues' tables); SWEEP2_LAYOUTS: the second sweep's (default: the
# same); SWEEP_DTYPES: their output types (default f32,f16,bf16).
# BUILD/lib, when present, goes first on LD_LIBRARY_PATH: the shared
# libraries carried with a build to a machine without them.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bench/multicore_sweep.sh BUILD OUTDIR [THREADS] [SECONDS]" >&2
  exit 2
fi
build=$1 out=$2 threads=${3:-1,2,4,8,16} budget=${4:-480}
if [ ! -x "$build/nibble" ] && [ ! -x "$build/nibble_access_probe" ]; then
  echo "multicore_sweep: no nibble or nibble_access_probe in '$build'" >&2
  exit 2
fi
steps=" ${STEPS:-probe sweep1 dequant sweep2} "
if [ -d "$build/lib" ]; then
  export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
log() { echo "$* after $(($(date +%s) - start)) s" | tee -a "$out/log.txt"; }
layouts=${SWEEP_LAYOUTS:-pmx-q1,pmx-q0,onnx-b1,onnx-b0,int8,gptq,gptq-act,awq,ct,ct-act,bnb-nf4,q4_0,q4_1,q5_0,q5_1,q8_0,q2_k,q3_k,q4_k,q5_k,q6_k,tq2_0,iq4_nl,iq4_xs,mxfp4}
maxt=${threads##*,}
mkck=$build/tests/make_checkpoints
[ -x "$mkck" ] || mkck=$build/make_checkpoints
# One thread per core, consecutive cores first (see README, Speed).
export OMP_PROC_BIND=close OMP_PLACES=cores
mkdir -p "$out"

{
  echo "date: $(date -u +%FT%TZ)"
  echo "nproc: $(nproc)"
  uname -a
  lscpu 2>/dev/null || grep -m1 'model name' /proc/cpuinfo
  grep -E 'MemTotal|MemAvailable' /proc/meminfo
  echo "transparent hugepages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
} >"$out/machine.txt" 2>&1

has() { [[ $steps == *" $1 "* ]]; }

if has probe && [ -x "$build/nibble_access_probe" ]; then
  timeout $(($(left) - 60)) "$build/nibble_access_probe" "$threads" 4096 4096 15 >"$out/probe.txt" 2>&1
  log "probe: rc=$?"
fi

sweep() {  # sweep NAME THREADS SECONDS [LAYOUTS]
  timeout "$3" "$build/nibble" bench --layout "${4:-$layouts}" --group-sizes 128 --threads "$2" \
    --dtype "${SWEEP_DTYPES:-f32,f16,bf16}" --reps 9 --out "$out/$1" >"$out/$1.txt" 2>>"$out/log.txt"
  log "$1 (threads $2): rc=$?"
  rm -f "$out/$1.csv"  # the JSON holds the same rows
}

if has ab && [ -n "${AB_BASE:-}" ] && [ -x "$build/nibble" ]; then
  ab_layouts=${AB_LAYOUTS:-pmx-q1,pmx-q0,onnx-b0,int8,gptq,awq,ct,bnb-nf4,q4_0}
  for round in $(seq 1 "${AB_ROUNDS:-2}"); do
    # Alternate which build goes first, so a drift favours neither.
    order="base new"
    [ $((round % 2)) = 0 ] && order="new base"
    for who in $order; do
      bin=$build/nibble
      [ "$who" = base ] && bin=$AB_BASE
      timeout $(($(left) - 30)) "$bin" bench --layout "$ab_layouts" --group-sizes 128 \
        --threads "1,$maxt" --dtype "${AB_DTYPES:-f16,bf16}" --reps 9 --no-in-cache --format csv \
        2>>"$out/log.txt" | sed "s/^/$round,/" >>"$out/ab-$who.csv"
      log "ab round $round $who: rc=${PIPESTATUS[0]}"
    done
  done
fi

if has sweep1; then sweep sweep1 "$threads" "$(($(left) - 10))"; fi

if has dequant && [ -x "$mkck" ] && [ "$(left)" -gt 150 ]; then
  # `nibble dequant` of 96 GPTQ layers of 4096 x 4096 (G = 128) to float16,
  # input and output on tmpfs (no disk in the figure), against `cp -r` of
  # its own output; alternated three times.
  d=/dev/shm/nibble-sweep
  rm -rf "$d" && mkdir -p "$d"
  {
    "$mkck" "$d" --large 4096 4096 96 >/dev/null && du -sh "$d/large_gptq"
    for round in 1 2 3; do
      for t in 1 "$maxt"; do
        a=$(date +%s.%N)
        "$build/nibble" dequant "$d/large_gptq" "$d/out" --dtype f16 --threads "$t" --quiet
        rc=$?
        b=$(date +%s.%N)
        echo "round $round: nibble dequant --threads $t: rc=$rc $(awk "BEGIN{print $b - $a}") s"
        [ "$t" = 1 ] && rm -rf "$d/out"
      done
      a=$(date +%s.%N)
      cp -r "$d/out" "$d/copy"
      b=$(date +%s.%N)
      echo "round $round: cp -r of the output ($(du -sh "$d/out" | cut -f1)): $(awk "BEGIN{print $b - $a}") s"
      rm -rf "$d/out" "$d/copy"
    done
  } >"$out/dequant.txt" 2>&1
  rm -rf "$d"
  log "dequant vs cp: done"
fi

# A second sample of the two ends, if the rest left time for it.
if has sweep2 && [ "$(left)" -gt 150 ]; then
  sweep sweep2 "1,$maxt" "$(($(left) - 10))" "${SWEEP2_LAYOUTS:-$layouts}"
fi
exit 0
