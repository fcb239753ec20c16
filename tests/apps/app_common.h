/* app_common: the few helpers the example apps share: a deterministic PRNG (splitmix64), a
 * checksum (FNV-1a 64) and a check macro that prints "<app>: FAIL ..." and exits 1.
 * Lock: none (each thread keeps its own PRNG state). Hot path: n/a (test programs). */
#ifndef CUPROF_APP_COMMON_H
#define CUPROF_APP_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* splitmix64: tests re-derive every size and byte in Python from the same seed. */
static inline uint64_t
app_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

#define APP_FNV_OFFSET 0xCBF29CE484222325ull

static inline uint64_t
app_fnv(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

/* Stops the program with one line naming the app, the failed expression and the value. */
#define APP_CHECK(app, cond, what, value)                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("%s: FAIL %s (%lld) at line %d\n", app, what, (long long)(value), __LINE__);    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
