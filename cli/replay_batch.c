/* replay_batch.c: several replays of one plan on every core (threads share only the plan and
 *   the snapshot, read-only), and what a replay starts from: the capacity the recording's first
 *   OOM saw, and the recording's own settings. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator/alloc_config.h"
#include "allocator/trace_sink.h"
#include "cli/analysis.h"
#include "cli/cli_util.h"
#include "cli/replay.h"
#include "cli/replay_run.h"

/* Parallel replays of one plan: each thread takes the next setting not yet taken. */
struct replay_batch {
    const struct replay_plan *plan;
    const struct replay_opts *opts;
    struct replay_result *res;
    size_t n;
    atomic_size_t next, done;
    atomic_int failed;
};

static void *
batch_worker(void *arg)
{
    struct replay_batch *b = arg;
    for (size_t i; (i = atomic_fetch_add(&b->next, 1)) < b->n;) {
        if (replay_setting(b->plan, &b->opts[i], &b->res[i]) != 0)
            atomic_store(&b->failed, 1);
        atomic_fetch_add(&b->done, 1);
    }
    return NULL;
}

int
replay_settings(const struct replay_plan *plan, const struct replay_opts *opts,
                struct replay_result *res, size_t n, unsigned threads, bool progress)
{
    struct replay_batch b = {.plan = plan, .opts = opts, .res = res, .n = n};
    atomic_init(&b.next, 0);
    atomic_init(&b.done, 0);
    atomic_init(&b.failed, 0);
    if (threads == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus > 0 ? (unsigned)cpus : 1;
    }
    if (threads > n)
        threads = n > 0 ? (unsigned)n : 1;
    pthread_t *tids = calloc(threads, sizeof(*tids));
    unsigned started = 0;
    for (unsigned t = 1; tids != NULL && t < threads; t++)
        started += pthread_create(&tids[started], NULL, batch_worker, &b) == 0;
    struct cli_progress bar;
    if (progress)
        cli_progress_begin(&bar, "replaying settings");
    /* This thread replays too, and between its settings shows how many are done. */
    for (size_t i; (i = atomic_fetch_add(&b.next, 1)) < n;) {
        if (progress)
            cli_progress_update(&bar, atomic_load(&b.done), n);
        if (replay_setting(plan, &opts[i], &res[i]) != 0)
            atomic_store(&b.failed, 1);
        atomic_fetch_add(&b.done, 1);
    }
    for (unsigned t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    if (progress)
        cli_progress_end(&bar);
    free(tids);
    return atomic_load(&b.failed) ? -1 : 0;
}

uint64_t
replay_capacity_from_ooms(const struct snapshot *snap, size_t device)
{
    struct device_analysis a;
    uint64_t capacity = REPLAY_UNLIMITED;
    if (device >= snap->device_count || analysis_run(snap, device, true, &a) != 0)
        return capacity;
    const struct snap_device_trace *t = &snap->device_traces[device];
    for (size_t i = 0; i < t->count; i++)
        if (t->entries[i].action == TRACE_OOM) {
            /* What the allocator held then (the history counts pass-through memory too, which
             * the replays keep off their device) and what the driver had free. */
            uint64_t passed = 0;
            if (analysis_passthrough_at(snap, device, i, &passed) != 0)
                passed = 0;
            uint64_t held = a.reserved_series[i];
            capacity = (passed < held ? held - passed : 0) + t->entries[i].device_free;
            break;
        }
    analysis_free(&a);
    return capacity;
}

const char *
replay_recorded_conf(const struct snapshot *snap, const char *path)
{
    const char *conf = snap->has_allocator_settings && snap->allocator_settings.alloc_conf
                           ? snap->allocator_settings.alloc_conf
                           : "";
    char err[ALLOC_CONFIG_ERR_LEN];
    struct alloc_config probe;
    if (alloc_config_parse(conf, &probe, err, sizeof(err)) != 0) {
        char safe[1024];
        fprintf(stderr, "cuprof: %s: the recorded settings do not parse (",
                cli_term(path, safe, sizeof safe));
        cli_fputs_term(err, stderr);
        fputs("): using defaults\n", stderr);
        conf = "";
    }
    return conf;
}

void
replay_conf_with(const char *base, const char *key, const char *value, char *out, size_t len)
{
    size_t used = 0, klen = strlen(key);
    out[0] = '\0';
    /* Items split at top-level commas ([256:1,512:2] is one item). */
    for (const char *p = base; *p != '\0';) {
        const char *q = p;
        int depth = 0;
        while (*q != '\0' && (*q != ',' || depth > 0)) {
            depth += (*q == '[') - (*q == ']');
            q++;
        }
        bool same = (size_t)(q - p) > klen && strncmp(p, key, klen) == 0 && p[klen] == ':';
        if (!same && q > p && used < len) {
            int n = snprintf(out + used, len - used, "%s%.*s", used ? "," : "", (int)(q - p), p);
            used += n > 0 ? (size_t)n : 0;
        }
        p = *q == ',' ? q + 1 : q;
    }
    if (value != NULL && used < len)
        snprintf(out + used, len - used, "%s%s:%s", used ? "," : "", key, value);
}
