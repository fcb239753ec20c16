/* lib_users: device memory made by two shared libraries and by the program itself, in a fixed
 * order whose live and peak bytes per library the tests know (all sizes whole 2 MiB pages, so
 * the device's footprint is exact too). Usage: lib_users. Output: one line, `lib_users: ok`.
 *
 *   step                                   runtime_user  driver_user       program
 *   runtime_user: a = 12 MiB, b = 6 MiB    18
 *   driver_user: managed m = 4 MiB                       4 (pass-through)
 *   driver_user: c = 14 MiB, d = 2 MiB                   16 (+ m)
 *   runtime_user frees b                   12
 *   program: e = 10 MiB                                                    10
 *   driver_user frees c                                  2 (+ m)
 *   exit (live: a, m, d, e)                12 / peak 18  2 / peak 16; m 4  10 / peak 10 */
#include "app_common.h"

#include <cuda_runtime_api.h>

#include "lib_users.h"

#define APP "lib_users"
#define MiB ((size_t)1 << 20)

#define CK(call)                                                                                   \
    do {                                                                                           \
        int r_ = (call);                                                                           \
        APP_CHECK(APP, r_ == 0, #call, r_);                                                        \
    } while (0)

int
main(void)
{
    void *a = NULL, *b = NULL, *e = NULL;
    uint64_t c = 0, d = 0, m = 0;
    CK(cudaSetDevice(0));
    CK(cudaFree(NULL)); /* makes the primary context current, as frameworks do first */
    CK(runtime_user_alloc(&a, 12 * MiB));
    CK(runtime_user_alloc(&b, 6 * MiB));
    CK(driver_user_alloc_managed(&m, 4 * MiB));
    CK(driver_user_alloc(&c, 14 * MiB));
    CK(driver_user_alloc(&d, 2 * MiB));
    CK(runtime_user_free(b));
    CK((int)cudaMalloc(&e, 10 * MiB));
    CK(driver_user_free(c));
    printf("%s: ok\n", APP);
    return 0; /* a, d, e and m stay live for the exit snapshot */
}
