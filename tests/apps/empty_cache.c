/* empty_cache: frees blocks and empties the cache (cuprof_empty_cache, PyTorch's
 * torch.cuda.empty_cache; nothing without cuprof) at chosen points, all on the legacy default
 * stream, so that under expandable_segments:True pages are unmapped and mapped again:
 *   1. A = 20 MiB + 512 KiB and B = 2 MiB; A freed; empty: the first 20 MiB page is unmapped
 *      and a free piece of 512 KiB stays at the start of the mapped run, in front of B.
 *      (`empty_cache dump` writes a snapshot here: cuprof_dump_snapshot.)
 *   2. C = 1.5 MiB (behind B); D = 20 MiB + 256 KiB maps that page again and takes the piece.
 *   3. 48 small blocks (8 KiB to 384 KiB); every other one freed, then the rest of the first
 *      half (its first whole 2 MiB pages are free); empty; the rest freed.
 *   4. B, C, D freed; empty: nothing stays mapped, the reservations go back.
 *   5. E = 3 MiB, freed (left cached at exit).
 * Every block is filled with its own byte and read back at both ends before its free.
 * Usage: empty_cache [dump]. Output (one line, identical with or without a profiler):
 *   empty_cache: allocs=A frees=F empties=E checksum=C */
#include "app_common.h"

#include <cuda_runtime_api.h>
#include <string.h>

#include "preload/cuprof.h"

#define APP    "empty_cache"
#define MIB    ((size_t)1 << 20)
#define KIB    ((size_t)1 << 10)
#define SMALL  48
#define SAMPLE 32

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        APP_CHECK(APP, e_ == cudaSuccess, #call, e_);                                              \
    } while (0)

static unsigned long long allocs, frees, empties;
static uint64_t checksum = APP_FNV_OFFSET;

/* Allocates n bytes filled with `byte`. */
static void *
take(size_t n, unsigned char byte)
{
    void *p = NULL;
    CK(cudaMalloc(&p, n));
    CK(cudaMemset(p, byte, n));
    allocs++;
    return p;
}

/* Checks both ends of a block filled by take(), folds them into the checksum, frees it. */
static void
give(void *p, size_t n, unsigned char byte)
{
    unsigned char head[SAMPLE], tail[SAMPLE];
    CK(cudaMemcpy(head, p, SAMPLE, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(tail, (const unsigned char *)p + n - SAMPLE, SAMPLE, cudaMemcpyDeviceToHost));
    for (int i = 0; i < SAMPLE; i++) {
        APP_CHECK(APP, head[i] == byte, "data check (head)", head[i]);
        APP_CHECK(APP, tail[i] == byte, "data check (tail)", tail[i]);
    }
    checksum = app_fnv(checksum, head, SAMPLE);
    checksum = app_fnv(checksum, tail, SAMPLE);
    CK(cudaFree(p));
    frees++;
}

/* The program's empty_cache: cuprof's when it is loaded (its answer is not part of the output,
 * which must be the same without it). */
static void
empty(void)
{
    (void)cuprof_empty_cache();
    empties++;
}

int
main(int argc, char **argv)
{
    int dump = argc > 1 && strcmp(argv[1], "dump") == 0;
    size_t a_n = 20 * MIB + 512 * KIB, b_n = 2 * MIB, c_n = MIB + 512 * KIB;
    size_t d_n = 20 * MIB + 256 * KIB, e_n = 3 * MIB;

    void *a = take(a_n, 0xA1), *b = take(b_n, 0xB2);
    give(a, a_n, 0xA1);
    empty();
    if (dump)
        (void)cuprof_dump_snapshot(NULL);

    void *c = take(c_n, 0xC3), *d = take(d_n, 0xD4);

    void *small[SMALL];
    for (int i = 0; i < SMALL; i++)
        small[i] = take((size_t)(i + 1) * 8 * KIB, (unsigned char)i);
    for (int i = 0; i < SMALL; i += 2)
        give(small[i], (size_t)(i + 1) * 8 * KIB, (unsigned char)i);
    for (int i = 1; i < SMALL / 2; i += 2)
        give(small[i], (size_t)(i + 1) * 8 * KIB, (unsigned char)i);
    empty();
    for (int i = SMALL / 2 + 1; i < SMALL; i += 2)
        give(small[i], (size_t)(i + 1) * 8 * KIB, (unsigned char)i);

    give(b, b_n, 0xB2);
    give(c, c_n, 0xC3);
    give(d, d_n, 0xD4);
    empty();

    give(take(e_n, 0xE5), e_n, 0xE5);
    printf(APP ": allocs=%llu frees=%llu empties=%llu checksum=%016llx\n", allocs, frees, empties,
           (unsigned long long)checksum);
    return 0;
}
