/* forwarded_signal.c: the value of a signal `cuprof run` passes on (forwarded_signal.h). */
#include "snapshot/forwarded_signal.h"

#include <stdint.h>

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
