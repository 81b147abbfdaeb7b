#!/usr/bin/env bash
# Build the C core with AddressSanitizer and UndefinedBehaviorSanitizer and run its harness
# (tests/native/core_harness.c: fixed hostile cases, then random ones for SECONDS, default 60).
# Then the same for add's document path (tests/native/documents_harness.c).
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
# add's document path (documents.c, with zlib where its header is there, as hatch_build.py builds it)
zlib=()
if echo '#include <zlib.h>' | ${CC:-cc} -fsyntax-only -x c - 2>/dev/null; then zlib=(-DSIMHASH_HAVE_ZLIB -lz); fi
${CC:-cc} -O1 -g -std=c99 -ffp-contract=off -fno-omit-frame-pointer -fsanitize=address,undefined \
    -fno-sanitize-recover=undefined -I"$out" -Isimhash_sqlite/native \
    -o "$out/documents_harness" tests/native/documents_harness.c simhash_sqlite/native/documents.c \
    simhash_sqlite/native/simhash_core.c "${zlib[@]}" -lm
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$out/documents_harness" "${1:-60}" "${2:-1}"
