/* What the C harnesses share (bench/native_sanitize.sh builds them): a splitmix64 stream of random
 * numbers, seeded by the harness (rng_state, set again from argv), and CHECK, which counts a failed
 * condition in `failures` and says where, without stopping the run. */
#ifndef SIMHASH_HARNESS_H
#define SIMHASH_HARNESS_H

#include <stdint.h>
#include <stdio.h>

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static long failures = 0;
#define CHECK(cond, ...)                                                                                             \
    do {                                                                                                             \
        if (!(cond)) {                                                                                               \
            failures++;                                                                                              \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                    \
            fprintf(stderr, __VA_ARGS__);                                                                            \
            fputc('\n', stderr);                                                                                     \
        }                                                                                                            \
    } while (0)

#endif
