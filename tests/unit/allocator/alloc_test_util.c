/* alloc_test_util.c: see alloc_test_util.h. */
#include "alloc_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocator/cuprof_errors.h"

struct alloc_fixture *
fixture_new(const char *conf, size_t capacity, int devices)
{
    struct alloc_fixture *fx = calloc(1, sizeof(*fx));
    char err[256];
    assert_non_null(fx);
    fake_device_init(&fx->fake, capacity);
    fx->ops = fake_device_ops(&fx->fake);
    fx->sink = fake_device_sink(&fx->fake);
    if (alloc_config_parse(conf, &fx->config, err, sizeof(err)) != 0)
        fail_msg("%s: %s", conf, err);
    fx->alloc = allocator_create(&fx->config, &fx->ops, &fx->sink, devices);
    assert_non_null(fx->alloc);
    return fx;
}

void
fixture_free(struct alloc_fixture *fx)
{
    allocator_destroy(fx->alloc);
    free(fx);
}

/* Value named for `key` in spec, if any. */
static bool
spec_value(const char *spec, const char *key, int64_t *value)
{
    size_t klen = strlen(key);
    const char *p = spec;
    while ((p = strstr(p, key)) != NULL) {
        bool start = p == spec || p[-1] == ' ' || p[-1] == '\n';
        if (start && p[klen] == '=') {
            *value = strtoll(p + klen + 1, NULL, 10);
            return true;
        }
        p += klen;
    }
    return false;
}

void
expect_stats(struct allocator *alloc, int device, const char *spec)
{
    struct memory_stats st;
    struct memory_stat_kv kv[MEMORY_STATS_KEY_COUNT];
    char report[8192];
    size_t used = 0;
    allocator_get_stats(alloc, device, &st);
    size_t n = memory_stats_flatten(&st, kv, MEMORY_STATS_KEY_COUNT);
    assert_int_equal(n, MEMORY_STATS_KEY_COUNT);
    report[0] = '\0';
    /* Every key named in spec must exist. */
    for (const char *p = spec; *p != '\0';) {
        while (*p == ' ' || *p == '\n')
            p++;
        const char *eq = strchr(p, '=');
        if (*p == '\0' || eq == NULL)
            break;
        char key[96];
        size_t len = (size_t)(eq - p) < sizeof(key) - 1 ? (size_t)(eq - p) : sizeof(key) - 1;
        memcpy(key, p, len);
        key[len] = '\0';
        int64_t dummy;
        if (!memory_stats_get(&st, key, &dummy))
            fail_msg("spec names unknown key %s", key);
        p = eq + 1;
        while (*p != '\0' && *p != ' ' && *p != '\n')
            p++;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t want = strcmp(kv[i].key, "max_split_size") == 0 ? -1 : 0;
        (void)spec_value(spec, kv[i].key, &want);
        if (kv[i].value != want && used < sizeof(report) - 128)
            used += (size_t)snprintf(report + used, sizeof(report) - used,
                                     "  %s = %lld, expected %lld\n", kv[i].key,
                                     (long long)kv[i].value, (long long)want);
    }
    if (used > 0)
        fail_msg("device %d stats differ:\n%s", device, report);
}

void
expect_invariants(struct allocator *alloc)
{
    char msg[256];
    if (allocator_check_invariants(alloc, msg, sizeof(msg)) != 0)
        fail_msg("invariant: %s", msg);
}

void
expect_trace(const struct fake_device *fake, size_t i, enum trace_action action, uint64_t addr,
             uint64_t size, uint64_t stream)
{
    if (i >= fake->trace_count)
        fail_msg("trace has %zu entries, wanted entry %zu", fake->trace_count, i);
    const struct trace_event *e = &fake->trace[i];
    if (e->action != action || e->addr != addr || e->size != size || e->stream != stream)
        fail_msg("trace[%zu] = (action %d, 0x%llx, %llu, stream %llu), expected (action %d, "
                 "0x%llx, %llu, stream %llu)",
                 i, e->action, (unsigned long long)e->addr, (unsigned long long)e->size,
                 (unsigned long long)e->stream, action, (unsigned long long)addr,
                 (unsigned long long)size, (unsigned long long)stream);
}

uint64_t
must_malloc(struct allocator *alloc, int device, size_t size, uint64_t stream)
{
    uint64_t addr = 0;
    int rc = allocator_malloc(alloc, device, size, stream, 7, &addr);
    if (rc != 0)
        fail_msg("malloc(%zu) failed: %d", size, rc);
    return addr;
}

void
must_free(struct allocator *alloc, uint64_t addr)
{
    int rc = allocator_free(alloc, addr, 0);
    if (rc != 0)
        fail_msg("free(0x%llx) failed: %d", (unsigned long long)addr, rc);
}
