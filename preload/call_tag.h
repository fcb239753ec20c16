/* call_tag.h: what a runtime-level wrapper (cudaMalloc, ...) leaves for the driver-level wrapper
 *   that its real runtime call reaches: the API name and the stack captured at the outermost layer.
 * Locking: none (thread-local state only).
 * Hot path: yes (two TLS stores per runtime call). */
#ifndef CUPROF_CALL_TAG_H
#define CUPROF_CALL_TAG_H

#include <stdbool.h>
#include <stdint.h>

struct call_tag {
    const char *api;    /* e.g. "cudaMalloc"; NULL when no runtime wrapper is on the stack */
    uint32_t stack_id;  /* captured by the runtime wrapper (0 = none) */
    bool has_stack;     /* true once the runtime wrapper captured (or chose not to capture) */
    const void *caller; /* return address into the code that called the outermost runtime
                           wrapper (NULL when none): the calling library without an unwind */
};

extern _Thread_local struct call_tag call_tag_current __attribute__((tls_model("initial-exec")));

/* Runtime wrappers save the previous tag, set theirs, call the real runtime, then restore. An
 * outer wrapper's caller stays: the call came from its caller. */
static inline struct call_tag
call_tag_push(const char *api, uint32_t stack_id, bool has_stack, const void *caller)
{
    struct call_tag saved = call_tag_current;
    call_tag_current.api = api;
    call_tag_current.stack_id = stack_id;
    call_tag_current.has_stack = has_stack;
    if (saved.caller == NULL)
        call_tag_current.caller = caller;
    return saved;
}

static inline void
call_tag_pop(struct call_tag saved)
{
    call_tag_current = saved;
}

#endif
