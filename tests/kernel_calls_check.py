#!/usr/bin/python3
"""Checks that the kernels' small helpers stay inlined in a Release build.

Usage: kernel_calls_check.py BINARY [OBJDUMP]

Disassembles BINARY (a program or library holding the kernel family) and
lists every call made from a function of a Highway target namespace
(nibble::N_AVX3_DL::..., nibble::N_AVX2::...). Each callee must be a
deliberate boundary named below: a kernel-level function that is out of
line on purpose (a row kernel's Run, a tile walker, a transpose), one of
its lambdas, a library entry the kernels call once per tile, or the C++
runtime. Anything else is a helper GCC stopped inlining: a call inside a
hot loop, with a vzeroupper and the loop's vector constants reloaded after
it (seen in 2026-12: F32FromF16, the float16 scale widening, out of line
in 75 kernel loops, cost the grid i-quants 3-30 %). Fix by marking the
helper always-inline (HWY_INLINE / NIBBLE_DECODE_INLINE), or, when the
boundary is deliberate, add it here with the reason.

It also lists the string instructions (rep movs / rep stos) in those
functions: GCC 12 makes them of copies into and fills of local arrays, and
a load from such a copy waits until it has left the store buffer, behind
every non-temporal store before it (seen in 2026-12: the exponents of
gpt-oss's transposed writes copied per word as a `rep movsq` made float32
1.5x slower). Only the functions named in STRING_OPS may hold them, where
they run once per band or call, not per store.
Exit 0: every call and string instruction is allowed; 1: those that are
not, by caller.
"""
import re
import subprocess
import sys

# Callees outside the target namespaces, by exact name (templates and
# parameters dropped).
RUNTIME = {
    '__cxa_guard_acquire', '__cxa_guard_release', '__cxa_guard_abort',  # function statics
    '_Unwind_Resume', 'memcpy', 'memset',
    'nibble::FloatCodeTable',  # a code kind's value table: once per row call
    'nibble::ConvertFloats',  # float inputs, a whole run per call
    'nibble::DequantizeTileReference',  # the scalar reference for edge tiles
    'nibble::CpuIsIntel', 'nibble::AmdCpuFamily',  # cached, once per tile choice
    'nibble::TransposeTile',  # StagedColumns: a chunk's words, once per chunk
    'nibble::KernelScratch',  # CodeTiles' stages: once per tile
    'nibble::MapGroups',  # a tile's group count under a group map: once per tile
}

# Callees inside a target namespace (N_* stands for any), by name; their
# lambdas (NAME::{lambda#i}) are allowed with them.
KERNEL_BOUNDARIES = {
    'nibble::N_*::RowKernel::Run',  # one row's [k0, k1): loops inside
    'nibble::N_*::RunRows',
    'nibble::N_*::FusedDot',
    'nibble::N_*::ColumnNibbleTiles',
    'nibble::N_*::GptqBlockTiles',
    'nibble::N_*::ColumnsDotAs',
    'nibble::N_*::ColumnsDotRows',  # once per call: the passes over the rows of X
    'nibble::N_*::MapRows',
    'nibble::N_*::StagedColumns',
    'nibble::N_*::WordTiles',  # a whole tile's bands, loops inside
    'nibble::N_*::CodeTiles',  # a whole tile's bands, loops inside
    'nibble::N_*::ColumnFamilyTiles',  # the column family's other paths (WordTiles' edges)
    'nibble::N_*::DotRowsG',
    'nibble::N_*::AccumulateDotRowsG',
    'nibble::N_*::TransposeLanes128',
    'nibble::N_*::TransposeBlocks512',
    'nibble::N_*::TransposeRegion128',
}

# Kernel functions whose string instructions run outside the store loops.
STRING_OPS = {
    'nibble::N_*::WordTiles',  # a band's parameters copied once per band
    # SSE4 (AVX2 zeroes it with vector stores): a RowJob zeroed per row and
    # chunk; set once per call instead it measured no faster there
    # (0.96-1.07x, 2026-12-07: that target is compute-bound on these tiles).
    'nibble::N_*::StagedColumns',
}

FUNCTION = re.compile(r'^[0-9a-f]+ <(.*)>:$')
CALL = re.compile(r'\tcall\s+[0-9a-f]+ <(.*)>$')
STRING_OP = re.compile(r'\trep[a-z]* +(movs|stos)')
TARGET_NS = re.compile(r'nibble::N_[A-Z0-9_]+::')


def base_name(symbol):
    """symbol without template arguments, parameters, clones or @plt."""
    symbol = re.sub(r'@plt$', '', symbol)
    symbol = re.sub(r' \[clone [^]]*\]', '', symbol)
    symbol = re.sub(r'\+0x[0-9a-f]+$', '', symbol)
    out, depth = [], 0
    for ch in symbol:
        if ch in '<(':
            depth += 1
        if depth == 0:
            out.append(ch)
        if ch in '>)':
            depth -= 1
    name = ''.join(out).strip()
    name = re.sub(r'^(void|bool|auto|long|int|char) ', '', name)
    name = re.sub(r'::operator const$', '', name)
    return TARGET_NS.sub('nibble::N_*::', name)


def allowed(callee):
    if callee in RUNTIME:
        return True
    owner = re.sub(r'::\{lambda#\d+\}.*$', '', callee)
    return owner in KERNEL_BOUNDARIES


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    objdump = sys.argv[2] if len(sys.argv) == 3 else 'objdump'
    text = subprocess.run([objdump, '-d', '--no-show-raw-insn', '-C', sys.argv[1]],
                          capture_output=True, text=True, check=True).stdout
    caller, kernel_functions, calls, bad, strings, bad_strings = None, 0, 0, {}, 0, {}
    for line in text.splitlines():
        m = FUNCTION.match(line)
        if m:
            caller = m.group(1) if TARGET_NS.search(m.group(1)) else None
            kernel_functions += caller is not None
            continue
        if caller is None:
            continue
        if STRING_OP.search(line):
            strings += 1
            owner = base_name(caller)
            if re.sub(r'::\{lambda#\d+\}.*$', '', owner) not in STRING_OPS:
                bad_strings[owner] = bad_strings.get(owner, 0) + 1
            continue
        m = CALL.search(line)
        if not m:
            continue
        calls += 1
        callee = base_name(m.group(1))
        if not allowed(callee):
            bad.setdefault(callee, set()).add(base_name(caller))
    if kernel_functions == 0:
        print(f'kernel_calls_check: no function of a Highway target namespace in {sys.argv[1]}',
              file=sys.stderr)
        return 1
    if bad:
        print(f'kernel_calls_check: {len(bad)} helper(s) called out of line from the kernels '
              '(mark them always-inline, or list a deliberate boundary in this script):')
        for callee, callers in sorted(bad.items()):
            print(f'  {callee}  <- {", ".join(sorted(callers)[:4])}'
                  f'{" ..." if len(callers) > 4 else ""}')
    if bad_strings:
        print(f'kernel_calls_check: string instructions in {len(bad_strings)} kernel '
              'function(s) (read the values where they lie or copy them with vector '
              'loads and stores; or list the function in STRING_OPS with the reason):')
        for owner, n in sorted(bad_strings.items()):
            print(f'  {owner}: {n}')
    if bad or bad_strings:
        return 1
    print(f'kernel_calls_check: {calls} calls from {kernel_functions} kernel functions, '
          f'all to deliberate boundaries; {strings} string instructions, all in STRING_OPS')
    return 0


if __name__ == '__main__':
    sys.exit(main())
