/* bench_clock.h: what every benchmark program times with: a monotonic clock in nanoseconds and
 *   the median of a few repetitions (the figure each bench line quotes).
 * Locking: none.
 * Hot path: no (benchmarks only). */
#ifndef CUPROF_BENCH_CLOCK_H
#define CUPROF_BENCH_CLOCK_H

#include <time.h>

static inline double
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Sorts v[0..n) in place (insertion sort: n is a handful of repetitions) and returns its middle. */
static inline double
median(double *v, int n)
{
    for (int i = 1; i < n; i++) {
        double x = v[i];
        int j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
    return v[n / 2];
}

#endif
