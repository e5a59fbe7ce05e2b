#!/usr/bin/env bash
# Installs the built tree into a prefix and builds a consumer against it:
# find_package(nibble CONFIG) with the static and the shared library, and
# pkg-config; the core library (C API) without protobuf; the checkpoint
# examples (examples/checkpoint_stats.c, .cc) built both ways and run on
# CHECKPOINT. Usage: run_consumer_test.sh BUILD_DIR WORK_DIR CHECKPOINT
set -eu
build=$1 work=$2 checkpoint=$3
examples=$(cd "$(dirname "$0")/../../examples" && pwd)
[ -e "$checkpoint" ] || { echo "FAIL: no checkpoint $checkpoint"; exit 1; }
src=$(cd "$(dirname "$0")" && pwd)
prefix="$work/prefix"
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -1)
ls "$libdir" | grep -q '^libnibble\.so\.[0-9]' || { echo "FAIL: no versioned libnibble.so"; exit 1; }
core_so=$(ls "$libdir"/libnibble_core.so.*.*.* | head -1)
if readelf -d "$core_so" | grep NEEDED | grep -q protobuf; then
  echo "FAIL: $core_so needs libprotobuf"; exit 1
fi
passed=1
for link in static shared; do
  cmake -S "$src" -B "$work/$link" -DCMAKE_PREFIX_PATH="$prefix" -DNIBBLE_LINK=$link >/dev/null
  cmake --build "$work/$link" >/dev/null
  LD_LIBRARY_PATH="$libdir" "$work/$link/consumer_cc"
  LD_LIBRARY_PATH="$libdir" "$work/$link/consumer_c"
  LD_LIBRARY_PATH="$libdir" "$work/$link/consumer_c_core"
  LD_LIBRARY_PATH="$libdir" "$work/$link/checkpoint_stats_c" "$checkpoint" | tail -1
  LD_LIBRARY_PATH="$libdir" "$work/$link/checkpoint_stats_cc" "$checkpoint" | tail -1
  passed=$((passed + 5))
done
if command -v pkg-config >/dev/null; then
  export PKG_CONFIG_PATH="$libdir/pkgconfig"
  c++ -std=c++17 "$src/main.cc" -o "$work/pc_cc" $(pkg-config --cflags --libs nibble)
  LD_LIBRARY_PATH="$libdir" "$work/pc_cc"
  cc "$src/main.c" -o "$work/pc_c" $(pkg-config --cflags --libs nibble) -lstdc++
  LD_LIBRARY_PATH="$libdir" "$work/pc_c"
  # The core library: no protobuf in its link line.
  if pkg-config --libs --static nibble-core | grep -q protobuf; then
    echo "FAIL: pkg-config nibble-core names protobuf"; exit 1
  fi
  cc "$src/main.c" -o "$work/pc_c_core" $(pkg-config --cflags --libs nibble-core) -lstdc++
  LD_LIBRARY_PATH="$libdir" "$work/pc_c_core"
  # A C program linked against the static core with only what
  # `pkg-config --static` says (C++ runtime and OpenMP included).
  cc "$src/main.c" -o "$work/pc_c_core_static" $(pkg-config --cflags nibble-core) \
    -Wl,-Bstatic -lnibble_core -Wl,-Bdynamic \
    $(pkg-config --static --libs nibble-core | sed 's/-lnibble_core//')
  "$work/pc_c_core_static"
  # The checkpoint example, exactly as its header comment says to build it
  # (the .pc file carries -lm and an rpath: no LD_LIBRARY_PATH).
  cc "$examples/checkpoint_stats.c" $(pkg-config --cflags --libs nibble-core) -o "$work/pc_stats"
  env -u LD_LIBRARY_PATH "$work/pc_stats" "$checkpoint" | tail -1
  cc "$examples/checkpoint_stats.c" -o "$work/pc_stats_static" $(pkg-config --cflags nibble-core) \
    -Wl,-Bstatic -lnibble_core -Wl,-Bdynamic \
    $(pkg-config --static --libs nibble-core | sed 's/-lnibble_core//') -lm
  "$work/pc_stats_static" "$checkpoint" | tail -1
  passed=$((passed + 6))
fi
echo "$passed passed, 0 failed"
