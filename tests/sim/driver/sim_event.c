/* Events: creation, queries, synchronization, destruction and elapsed time. Records are queued
 * work (sim_stream.c's event_record): an event completes when its stream reaches the record. */
#include <stdlib.h>
#include <time.h>

#include "sim_config.h"
#include "sim_driver.h"
#include "sim_graph.h"

void
sim_event_unref(struct CUevent_st *e)
{
    if (atomic_fetch_sub(&e->refs, 1) == 1) {
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->cond);
        free(e);
    }
}

CUresult
cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    struct CUctx_st *ctx;
    CUresult r = sim_ctx_require(&ctx);
    if (r != CUDA_SUCCESS)
        return r;
    if (!phEvent || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                         CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    struct CUevent_st *e = calloc(1, sizeof(*e));
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = Flags;
    atomic_init(&e->refs, 1);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    *phEvent = e;
    return CUDA_SUCCESS;
}

/* What cuEventQuery and cuEventSynchronize check first: a live driver, an event, and not one a
 * capture recorded (CUDA_ERROR_CAPTURED_EVENT). */
static CUresult
event_waitable(CUevent ev)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    return sim_capture_active() ? sim_capture_check_sync(NULL, ev) : CUDA_SUCCESS;
}

CUresult
cuEventQuery(CUevent hEvent)
{
    CUresult r = event_waitable(hEvent);
    if (r != CUDA_SUCCESS)
        return r;
    int err = sim_fail_check(SIM_FAIL_EVENT_QUERY, 0);
    if (err)
        return (CUresult)err;
    pthread_mutex_lock(&hEvent->lock);
    bool done = hEvent->done_gen >= hEvent->record_gen;
    pthread_mutex_unlock(&hEvent->lock);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult
cuEventSynchronize(CUevent hEvent)
{
    CUresult r = event_waitable(hEvent);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&hEvent->lock);
    uint64_t target = hEvent->record_gen;
    while (hEvent->done_gen < target)
        pthread_cond_wait(&hEvent->cond, &hEvent->lock);
    pthread_mutex_unlock(&hEvent->lock);
    return CUDA_SUCCESS;
}

CUresult
cuEventDestroy_v2(CUevent hEvent)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!hEvent)
        return CUDA_ERROR_INVALID_HANDLE;
    /* Pending records keep their own reference, like the real deferred destruction. */
    sim_event_unref(hEvent);
    return CUDA_SUCCESS;
}

CUresult
cuEventDestroy(CUevent hEvent)
{
    return cuEventDestroy_v2(hEvent);
}

CUresult
cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    CUresult r = sim_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if (!hStart || !hEnd)
        return CUDA_ERROR_INVALID_HANDLE;
    struct timespec t[2];
    CUevent evs[2] = {hStart, hEnd};
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&evs[i]->lock);
        bool timing = !(evs[i]->flags & CU_EVENT_DISABLE_TIMING);
        bool recorded = evs[i]->record_gen > 0;
        bool done = evs[i]->done_gen >= evs[i]->record_gen;
        t[i] = evs[i]->when;
        pthread_mutex_unlock(&evs[i]->lock);
        if (!timing || !recorded)
            return CUDA_ERROR_INVALID_HANDLE;
        if (!done)
            return CUDA_ERROR_NOT_READY;
    }
    *pMilliseconds = (float)((double)(t[1].tv_sec - t[0].tv_sec) * 1e3 +
                             (double)(t[1].tv_nsec - t[0].tv_nsec) / 1e6);
    return CUDA_SUCCESS;
}

CUresult
cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}
