/* unload.c: dlclose as the program sees it (see unload.h). */
#include "preload/unload.h"

#include "preload/real_dl.h"
#include "preload/runtime.h"
#include "snapshot/stacks.h"

#include <errno.h>
#include <link.h>
#include <stddef.h>

static int
removed_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
        *(unsigned long long *)data = info->dlpi_subs;
    return 1; /* the loader's own counter: every object reports the same */
}

/* How many objects the loader has unmapped so far (glibc's dlpi_subs). */
static unsigned long long
objects_removed(void)
{
    unsigned long long subs = 0;
    dl_iterate_phdr(removed_cb, &subs);
    return subs;
}

static const char *
unwinder_name(enum stacks_unwinder u)
{
    return u == STACKS_UNWINDER_CUPROF ? "cuprof's unwinder" : "libgcc's unwinder";
}

int
unload_dlclose(void *handle)
{
    unsigned long long before = objects_removed();
    int rc = real_dl_close(handle);
    int saved_errno = errno;
    /* A dlclose that only dropped a reference unmapped nothing: nothing to forget. */
    if (objects_removed() != before && stacks_forget_code() && runtime_log_info())
        runtime_log("cuprof: a shared object was unloaded: stacks by %s from now on (libunwind "
                    "would keep walking new code there with the unloaded code's frames)",
                    unwinder_name(stacks_unwinder()));
    errno = saved_errno;
    return rc;
}
