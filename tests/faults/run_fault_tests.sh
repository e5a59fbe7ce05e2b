#!/usr/bin/env bash
# Fault injection for `nibble dequant` and `nibble fold`:
#   * SIGKILL at random points: the output absent or complete (identical to
#     an uninterrupted run), no temporary left, input untouched
#   * file-size limit (ulimit -f) and a full disk (1 MiB tmpfs): clear error, nothing left
#   * read-only destination (read-only tmpfs, else /sys): clear error, nothing left
#   * input truncated while nibble reads it: an error (or a complete output), not SIGBUS
# Usage: run_fault_tests.sh NIBBLE MAKE_CHECKPOINTS MAKE_FOLD_MODELS WORKDIR
set -u
nibble=$1 make_ck=$2 make_fold=$3 work=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
pass=0 fail=0 skip=0
ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }
skipped() { echo "SKIP $1: $2"; skip=$((skip + 1)); }
leftovers() { ls -A "$1" 2>/dev/null | grep -E "$2" || true; }

"$make_ck" "$work/ck" --large 2048 8192 >/dev/null || { echo "cannot make checkpoints"; exit 1; }
"$make_ck" "$work/ck" >/dev/null || exit 1
"$make_fold" "$work/fold" >/dev/null || exit 1
in_sum=$(cat "$work/ck/large_gptq/"* | md5sum)

# --- SIGKILL at random points --------------------------------------------
# The invariant, whatever the moment of the kill: the output is absent, or
# complete and identical to an uninterrupted run's; no temporary is left
# visible; the input is unchanged. (A kill after the final link leaves the
# finished output: that is correct, not a failure.)
mkdir -p "$work/ref"
"$nibble" dequant "$work/ck/large_gptq" "$work/ref/out.safetensors" --dtype f32 --quiet ||
  { echo "reference dequant failed"; exit 1; }
RANDOM=7
for i in $(seq 1 12); do
  dir="$work/kill"
  rm -rf "$dir" && mkdir -p "$dir"
  out="$dir/out.safetensors"
  "$nibble" dequant "$work/ck/large_gptq" "$out" --dtype f32 --quiet &
  pid=$!
  # 0 to 0.6 s: before, during and (the run takes ~0.3 s) after the write.
  sleep "0.$((RANDOM % 6))$((RANDOM % 10))"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  status=$?
  others=$(ls -A "$dir" | grep -vx 'out.safetensors' || true)
  if [ -n "$others" ]; then
    bad "dequant_sigkill_$i" "left $others (status $status)"
  elif [ -e "$out" ] && ! cmp -s "$out" "$work/ref/out.safetensors"; then
    bad "dequant_sigkill_$i" "an output exists but differs from an uninterrupted run's (status $status)"
  elif [ "$status" -eq 0 ] && [ ! -e "$out" ]; then
    bad "dequant_sigkill_$i" "exit 0 without an output"
  else
    ok "dequant_sigkill_$i (status $status, output $([ -e "$out" ] && echo complete || echo absent))"
  fi
done
[ "$(cat "$work/ck/large_gptq/"* | md5sum)" = "$in_sum" ] && ok "dequant_input_untouched" || bad "dequant_input_untouched" "input changed"

fold_in="$work/fold/mmnb_zp.onnx"
fold_sum=$(md5sum < "$fold_in")
"$nibble" fold "$fold_in" "$work/ref/out.onnx" --external-data --quiet ||
  { echo "reference fold failed"; exit 1; }
for i in $(seq 1 6); do
  dir="$work/killf"
  rm -rf "$dir" && mkdir -p "$dir"
  out="$dir/out.onnx"
  "$nibble" fold "$fold_in" "$out" --external-data --quiet &
  pid=$!
  sleep "0.0$((RANDOM % 4))$((RANDOM % 10))"  # the fold takes ~0.02 s
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  status=$?
  others=$(ls -A "$dir" | grep -vxE 'out\.onnx|out\.onnx\.data' || true)
  if [ -n "$others" ]; then
    bad "fold_sigkill_$i" "left $others (status $status)"
  elif [ -e "$out" ] && ! { cmp -s "$out" "$work/ref/out.onnx" && cmp -s "$out.data" "$work/ref/out.onnx.data"; }; then
    bad "fold_sigkill_$i" "a model exists but it or its data differs from an uninterrupted run's"
  elif [ ! -e "$out" ] && [ -e "$out.data" ] && ! cmp -s "$out.data" "$work/ref/out.onnx.data"; then
    # Killed between the two links: the data file alone, and complete.
    bad "fold_sigkill_$i" "a partial data file was left"
  elif [ "$status" -eq 0 ] && [ ! -e "$out" ]; then
    bad "fold_sigkill_$i" "exit 0 without an output"
  else
    ok "fold_sigkill_$i (status $status, model $([ -e "$out" ] && echo complete || echo absent))"
  fi
done
[ "$(md5sum < "$fold_in")" = "$fold_sum" ] && ok "fold_input_untouched" || bad "fold_input_untouched" "input changed"

# --- File-size limit ---------------------------------------------------------
mkdir -p "$work/limit"
msg=$( (ulimit -f 1024; "$nibble" dequant "$work/ck/large_gptq" "$work/limit/out.safetensors" --quiet) 2>&1)
status=$?
if [ "$status" -ne 0 ] && echo "$msg" | grep -q "File too large" && [ -z "$(ls -A "$work/limit")" ]; then
  ok "dequant_file_size_limit"
else
  bad "dequant_file_size_limit" "status $status, '$msg', left: $(ls -A "$work/limit")"
fi

# --- Full disk and read-only destination (tmpfs mounts need privileges) ---
mkdir -p "$work/full" "$work/ro"
if mount -t tmpfs -o size=1m tmpfs "$work/full" 2>/dev/null; then
  msg=$("$nibble" dequant "$work/ck/large_gptq" "$work/full/out.safetensors" --quiet 2>&1)
  status=$?
  if [ "$status" -ne 0 ] && echo "$msg" | grep -q "No space left on device" && [ -z "$(ls -A "$work/full")" ]; then
    ok "dequant_disk_full"
  else
    bad "dequant_disk_full" "status $status, '$msg', left: $(ls -A "$work/full")"
  fi
  msg=$("$nibble" fold "$work/fold/mmnb8.onnx" "$work/full/out.onnx" --external-data --quiet 2>&1)
  status=$?
  # mmnb8 is small: it may fit; then it must be complete.
  if [ "$status" -ne 0 ] && [ -n "$(ls -A "$work/full")" ]; then bad "fold_disk_full" "left files"; else ok "fold_disk_full (status $status)"; fi
  umount "$work/full"
else
  skipped "dequant_disk_full" "cannot mount a tmpfs here"
fi
if mount -t tmpfs -o ro,size=1m tmpfs "$work/ro" 2>/dev/null; then
  rodir="$work/ro"
else
  rodir=/sys  # read-only in containers; EACCES/EROFS for root alike
fi
msg=$("$nibble" dequant "$work/ck/gptq" "$rodir/out.safetensors" --quiet 2>&1)
status=$?
if [ "$status" -ne 0 ] && echo "$msg" | grep -q "cannot create '$rodir/out.safetensors'" && [ ! -e "$rodir/out.safetensors" ]; then
  ok "dequant_read_only_destination"
else
  bad "dequant_read_only_destination" "status $status, '$msg'"
fi
msg=$("$nibble" fold "$work/fold/mmnb8.onnx" "$rodir/out.onnx" --quiet 2>&1)
status=$?
if [ "$status" -ne 0 ] && echo "$msg" | grep -q "cannot create" && [ ! -e "$rodir/out.onnx" ]; then
  ok "fold_read_only_destination"
else
  bad "fold_read_only_destination" "status $status, '$msg'"
fi
mountpoint -q "$work/ro" && umount "$work/ro"

# --- Input truncated while being read ---------------------------------------
# Either nibble finished first (then its output is the complete one), or it
# fails with a clear error and leaves nothing; never SIGBUS, never a
# partial output.
cp -r "$work/ck/large_gptq" "$work/trunc"
"$nibble" dequant "$work/trunc" "$work/ref/trunc_out.safetensors" --dtype f32 --quiet ||
  { echo "reference dequant failed"; exit 1; }
rm -rf "$work/trunc"
for round in 1 2 3; do
  cp -r "$work/ck/large_gptq" "$work/trunc"
  "$nibble" dequant "$work/trunc" "$work/trunc_out.safetensors" --dtype f32 --quiet 2>"$work/trunc_err" &
  pid=$!
  sleep "0.0$((round * 2))"
  truncate -s 1000 "$work/trunc/model.safetensors"
  wait "$pid"
  status=$?
  if [ "$status" -eq 0 ] && cmp -s "$work/trunc_out.safetensors" "$work/ref/trunc_out.safetensors"; then
    ok "dequant_truncated_while_reading_$round (finished first, output complete)"
  elif [ "$status" -eq 1 ] && [ ! -e "$work/trunc_out.safetensors" ] && [ -s "$work/trunc_err" ]; then
    ok "dequant_truncated_while_reading_$round: $(head -c 160 "$work/trunc_err")"
  else
    bad "dequant_truncated_while_reading_$round" "status $status (SIGBUS is 135): $(cat "$work/trunc_err")"
  fi
  rm -rf "$work/trunc" "$work/trunc_out.safetensors"
done

echo "$pass passed, $fail failed, $skip skipped"
rm -rf "$work"
[ "$fail" -eq 0 ]
