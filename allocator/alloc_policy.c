/* alloc_policy.c: the out-of-line parts of PyTorch's size rules (roundup_power2_next_division,
 * format_size); the hot ones are static inline in alloc_policy.h. */
#include "allocator/alloc_policy.h"

#include <stdio.h>

size_t
alloc_policy_next_division(size_t size, size_t divisions)
{
    if ((size & (size - 1)) == 0)
        return size;
    size_t floor2 = (size_t)1 << alloc_policy_log2_floor(size);
    size_t step = floor2 >> alloc_policy_log2_floor(divisions);
    if (step == 0)
        return floor2 * 2;
    size_t down = size & ~(step - 1);
    return down == size ? size : down + step;
}

void
alloc_policy_format_size(uint64_t bytes, char *buf, size_t len)
{
    if (bytes <= 1024)
        snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
    else if (bytes <= 1048576)
        snprintf(buf, len, "%.2f KiB", (double)bytes / 1024.0);
    else if (bytes <= 1073741824)
        snprintf(buf, len, "%.2f MiB", (double)bytes / 1048576.0);
    else
        snprintf(buf, len, "%.2f GiB", (double)bytes / 1073741824.0);
}
