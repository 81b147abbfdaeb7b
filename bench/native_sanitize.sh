#!/usr/bin/env bash
# Build the C core with AddressSanitizer and UndefinedBehaviorSanitizer and run its harness
# (tests/native/core_harness.c: fixed hostile cases, then random ones for SECONDS, default 60).
# Usage: bench/native_sanitize.sh [SECONDS] [SEED]   (needs cc with libasan/libubsan, and python3)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python3 simhash_sqlite/native/gen_unicode_tables.py "$out/_unicode_tables.h"
${CC:-cc} -O1 -g -std=c99 -ffp-contract=off -fno-omit-frame-pointer -fsanitize=address,undefined \
    -fno-sanitize-recover=undefined -I"$out" -Isimhash_sqlite/native \
    -o "$out/core_harness" tests/native/core_harness.c simhash_sqlite/native/simhash_core.c -lm
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$out/core_harness" "${1:-60}" "${2:-1}"
