/* forwarded_signal.c: the value of a signal `cuprof run` passes on (forwarded_signal.h). */
#include "snapshot/forwarded_signal.h"

#include <stdint.h>
#include <time.h>

/* Bits 0-31 the uid, 32-53 the pid (pid_max is at most 2^22), 54-63 the mark. */
#define FORWARDED_MARK      0x2c5ULL
#define FORWARDED_MARK_BITS 54
#define FORWARDED_PID_MASK  0x3fffffULL

union sigval
forwarded_signal_value(pid_t origin_pid, uid_t origin_uid)
{
    uint64_t packed = (FORWARDED_MARK << FORWARDED_MARK_BITS) |
                      (((uint64_t)origin_pid & FORWARDED_PID_MASK) << 32) | (uint32_t)origin_uid;
    union sigval value;
    value.sival_ptr = (void *)(uintptr_t)packed;
    return value;
}

bool
forwarded_signal_origin(union sigval value, pid_t *origin_pid, uid_t *origin_uid)
{
    uint64_t packed = (uint64_t)(uintptr_t)value.sival_ptr;
    if (packed >> FORWARDED_MARK_BITS != FORWARDED_MARK)
        return false;
    *origin_pid = (pid_t)((packed >> 32) & FORWARDED_PID_MASK);
    *origin_uid = (uid_t)(uint32_t)packed;
    return true;
}

/* A copy's word: bit 63 passed on, bits 41-62 the sender's pid, bits 0-40 the time in ms (+1, so
 * the word is never 0). */
#define COPY_FORWARDED_BIT 63
#define COPY_PID_SHIFT     41
#define COPY_TIME_MASK     ((1ULL << COPY_PID_SHIFT) - 1)
/* `cuprof run` passes its copy on within milliseconds; a copy a second apart is a new request. */
#define COPY_SAME_REQUEST_MS 1000

uint64_t
forwarded_signal_copy(pid_t origin_pid, bool forwarded)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now =
        ((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u + 1u) & COPY_TIME_MASK;
    return ((uint64_t)forwarded << COPY_FORWARDED_BIT) |
           (((uint64_t)origin_pid & FORWARDED_PID_MASK) << COPY_PID_SHIFT) | now;
}

bool
forwarded_signal_is_twin(uint64_t last, uint64_t copy)
{
    return last != 0 && (last >> COPY_FORWARDED_BIT) != (copy >> COPY_FORWARDED_BIT) &&
           ((last >> COPY_PID_SHIFT) & FORWARDED_PID_MASK) ==
               ((copy >> COPY_PID_SHIFT) & FORWARDED_PID_MASK) &&
           ((copy - last) & COPY_TIME_MASK) < COPY_SAME_REQUEST_MS;
}
