/* A minimal SQLite host for bench/fuzz_extension.py: opens a database, loads the extension given, and
 * runs the statements read from stdin (separated by NUL bytes), stepping each to the end. Errors of a
 * statement are counted and skipped (bad input is supposed to be an SQL error); a crash, or a report of
 * AddressSanitizer / UndefinedBehaviorSanitizer when the extension is built with them, ends the run.
 *
 *     cc -O1 -g -fsanitize=address,undefined -o host bench/extension_host.c -lsqlite3
 *     ./host index.db path/to/simhash.so < statements
 *
 * Prints "statements N errors E rows R" and, with -v, each error message.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s DATABASE EXTENSION [-v] < statements (NUL-separated)\n", argv[0]);
        return 2;
    }
    int verbose = argc > 3 && !strcmp(argv[3], "-v");
    size_t size = 0, capacity = 1 << 20;
    char *input = malloc(capacity + 1);
    size_t got;
    while (input && (got = fread(input + size, 1, capacity - size, stdin)) > 0) {
        size += got;
        if (size == capacity) input = realloc(input, (capacity *= 2) + 1);
    }
    if (!input) return 2;
    input[size] = 0;
    sqlite3 *db;
    if (sqlite3_open(argv[1], &db) != SQLITE_OK) {
        fprintf(stderr, "cannot open %s: %s\n", argv[1], sqlite3_errmsg(db));
        return 2;
    }
    char *error = NULL;
    sqlite3_enable_load_extension(db, 1);
    if (sqlite3_load_extension(db, argv[2], NULL, &error) != SQLITE_OK) {
        fprintf(stderr, "cannot load %s: %s\n", argv[2], error);
        return 2;
    }
    long statements = 0, errors = 0, rows = 0;
    for (size_t at = 0; at < size;) {
        size_t len = strlen(input + at);
        const char *sql = input + at;
        at += len + 1;
        if (!len) continue;
        statements++;
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db, sql, (int)len, &st, NULL);
        while (rc == SQLITE_OK && st) {
            if ((rc = sqlite3_step(st)) != SQLITE_ROW) break;
            rc = SQLITE_OK;
            rows++;
            for (int i = 0; i < sqlite3_column_count(st); i++) { /* touch every value, as a host would */
                if (sqlite3_column_type(st, i) == SQLITE_TEXT) (void)sqlite3_column_text(st, i);
                else if (sqlite3_column_type(st, i) == SQLITE_BLOB) (void)sqlite3_column_blob(st, i);
            }
        }
        if (rc != SQLITE_OK && rc != SQLITE_DONE) {
            errors++;
            if (verbose) fprintf(stderr, "%s\n", sqlite3_errmsg(db));
        }
        sqlite3_finalize(st);
    }
    printf("statements %ld errors %ld rows %ld\n", statements, errors, rows);
    int rc = sqlite3_close(db);
    free(input);
    return rc == SQLITE_OK ? 0 : 3;
}
