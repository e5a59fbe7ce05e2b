#!/usr/bin/env bash
# Installs the built tree into a prefix and builds a consumer against it:
# find_package(nibble CONFIG) with the static and the shared library, and
# pkg-config. Usage: run_consumer_test.sh BUILD_DIR WORK_DIR
set -eu
build=$1 work=$2
src=$(cd "$(dirname "$0")" && pwd)
prefix="$work/prefix"
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -1)
ls "$libdir" | grep -q '^libnibble\.so\.[0-9]' || { echo "FAIL: no versioned libnibble.so"; exit 1; }
passed=0
for link in static shared; do
  cmake -S "$src" -B "$work/$link" -DCMAKE_PREFIX_PATH="$prefix" -DNIBBLE_LINK=$link >/dev/null
  cmake --build "$work/$link" >/dev/null
  LD_LIBRARY_PATH="$libdir" "$work/$link/consumer_cc"
  LD_LIBRARY_PATH="$libdir" "$work/$link/consumer_c"
  passed=$((passed + 2))
done
if command -v pkg-config >/dev/null; then
  export PKG_CONFIG_PATH="$libdir/pkgconfig"
  c++ -std=c++17 "$src/main.cc" -o "$work/pc_cc" $(pkg-config --cflags --libs nibble)
  LD_LIBRARY_PATH="$libdir" "$work/pc_cc"
  cc "$src/main.c" -o "$work/pc_c" $(pkg-config --cflags --libs nibble) -lstdc++
  LD_LIBRARY_PATH="$libdir" "$work/pc_c"
  passed=$((passed + 2))
fi
echo "$passed passed, 0 failed"
