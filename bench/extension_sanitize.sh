#!/usr/bin/env bash
# Build the loadable SQLite extension (with the C core and zlib) with AddressSanitizer and
# UndefinedBehaviorSanitizer, no recovery, and run the extension's tests against that build: apsw and the
# stock sqlite3 shell load it (tests/test_extension.py takes SIMHASH_SQLITE_TEST_EXTENSION), with the
# sanitizer runtimes preloaded into Python and the shell. Leaks are not checked here (Python keeps memory
# to its exit); bench/fuzz_extension.py checks them in its own C host.
# Usage: bench/extension_sanitize.sh [PYTEST ARGS...]   (needs cc with libasan/libubsan, zlib.h, the venv)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python=${PYTHON:-.venv/bin/python}
"$python" simhash_sqlite/native/gen_unicode_tables.py "$out/_unicode_tables.h"
"$python" simhash_sqlite/native/gen_rule_constants.py "$out/_rule_constants.h"
${CC:-cc} -O1 -g -std=c99 -fPIC -shared -ffp-contract=off -fno-omit-frame-pointer -fsanitize=address,undefined \
    -fno-sanitize-recover=all -DSIMHASH_HAVE_ZLIB -I"$out" -Isimhash_sqlite/native \
    -Isimhash_sqlite/native/vendor/sqlite -o "$out/simhash.so" \
    simhash_sqlite/native/sqlite_extension.c simhash_sqlite/native/simhash_core.c -lm -lz
runtimes="$(${CC:-cc} -print-file-name=libasan.so):$(${CC:-cc} -print-file-name=libubsan.so)"
SIMHASH_SQLITE_TEST_EXTENSION="$out/simhash.so" LD_PRELOAD="$runtimes" \
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$python" -m pytest -q tests/test_extension.py tests/test_extension_short_texts.py "$@"
