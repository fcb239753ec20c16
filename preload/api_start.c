/* api_start.c: the public API's view of a runtime that does not exist yet. */
#include "preload/api_start.h"

#include <pthread.h>
#include <stdatomic.h>

#include "preload/config.h"
#include "preload/guard.h"
#include "preload/instance.h"
#include "preload/real_cuda.h"
#include "preload/runtime.h"

static pthread_mutex_t api_start_lock = PTHREAD_MUTEX_INITIALIZER;
static bool api_start_consumed;          /* protected by api_start_lock: runtime_init took it */
static bool api_start_kept;              /* protected by api_start_lock */
static enum history_mode api_start_mode; /* protected by api_start_lock */
static size_t api_start_entries;         /* protected by api_start_lock */

enum api_state
api_start_runtime(struct cuprof_runtime **rt)
{
    *rt = atomic_load_explicit(&runtime_ready_value, memory_order_acquire);
    if (*rt != NULL) {
        *rt = runtime_get(); /* (resumes a forked child) */
        return API_READY;
    }
    if (runtime_config()->mode == CUPROF_MODE_OFF || instance_inert())
        return API_OFF;
    /* Before cuInit the driver counts no device: the runtime must wait for the program. */
    const struct real_cuda *real = real_cuda_get();
    int count = 0;
    guard_enter();
    CUresult r = real != NULL && real->cuDeviceGetCount != NULL ? real->cuDeviceGetCount(&count)
                                                                : CUDA_ERROR_NOT_INITIALIZED;
    guard_leave();
    if (r == CUDA_ERROR_NOT_INITIALIZED)
        return API_NOT_STARTED;
    *rt = runtime_get();
    return *rt != NULL ? API_READY : API_OFF;
}

bool
api_start_keep_history(enum history_mode mode, size_t max_entries)
{
    pthread_mutex_lock(&api_start_lock);
    bool kept = !api_start_consumed;
    if (kept) {
        api_start_kept = true;
        api_start_mode = mode;
        api_start_entries = max_entries;
    }
    pthread_mutex_unlock(&api_start_lock);
    return kept;
}

void
api_start_history(enum history_mode *mode, size_t *max_entries)
{
    pthread_mutex_lock(&api_start_lock);
    api_start_consumed = true;
    if (api_start_kept) {
        *mode = api_start_mode;
        *max_entries = api_start_entries;
    }
    pthread_mutex_unlock(&api_start_lock);
}
