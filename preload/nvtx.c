/* nvtx.c: InitializeInjectionNvtx2 and NVTX's core callbacks: marks, push/pop and start/end
 * ranges (ASCII, wide and attribute forms, default domain and domains of their own), domain
 * creation and registered strings. */
#include "preload/nvtx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "preload/config.h"
#include "preload/instance.h"
#include "preload/nvtx_names.h"
#include "preload/runtime.h"
#include "snapshot/label_table.h"
#include "snapshot/trace_ring.h"

#define NVTX_EXPORT __attribute__((visibility("default")))

/* ---- Events before the trace exists (NVTX's first call may come before CUDA's). */

#define NVTX_PENDING_MAX 4096

enum nvtx_state { NVTX_WAITING, NVTX_READY, NVTX_DEAD };

static pthread_mutex_t nvtx_lock = PTHREAD_MUTEX_INITIALIZER;
static enum nvtx_state nvtx_state;     /* protected by nvtx_lock */
static struct cuprof_runtime *nvtx_rt; /* protected by nvtx_lock: set with NVTX_READY */
struct nvtx_event {
    uint32_t id;
    int64_t time_us;
};
static struct nvtx_event nvtx_pending[NVTX_PENDING_MAX]; /* protected by nvtx_lock */
static size_t nvtx_pending_count;                        /* protected by nvtx_lock */

static int64_t
nvtx_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* the ring's clock */
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void
nvtx_runtime_ready(struct cuprof_runtime *rt)
{
    pthread_mutex_lock(&nvtx_lock);
    for (size_t i = 0; rt != NULL && i < nvtx_pending_count; i++)
        trace_ring_annotate_at(rt->ring, nvtx_pending[i].id, nvtx_pending[i].time_us);
    nvtx_pending_count = 0;
    nvtx_rt = rt;
    nvtx_state = rt != NULL ? NVTX_READY : NVTX_DEAD;
    pthread_mutex_unlock(&nvtx_lock);
}

/* The slow way in: the runtime is not published yet (or will never be). */
static void
nvtx_emit_early(uint32_t id)
{
    int64_t now = nvtx_now_us();
    struct cuprof_runtime *rt = NULL;
    pthread_mutex_lock(&nvtx_lock);
    if (nvtx_state == NVTX_READY)
        rt = nvtx_rt;
    else if (nvtx_state == NVTX_WAITING && nvtx_pending_count < NVTX_PENDING_MAX)
        nvtx_pending[nvtx_pending_count++] = (struct nvtx_event){id, now};
    pthread_mutex_unlock(&nvtx_lock);
    if (rt != NULL)
        trace_ring_annotate(rt->ring, id);
}

void
nvtx_emit(uint32_t id)
{
    if (id == 0)
        return;
    /* Not runtime_get(): an NVTX call never starts CUDA on the program's behalf. */
    struct cuprof_runtime *rt = atomic_load_explicit(&runtime_ready_value, memory_order_acquire);
    if (__builtin_expect(rt != NULL, 1))
        trace_ring_annotate(rt->ring, id);
    else
        nvtx_emit_early(id);
}

/* ---- Each thread's open push/pop ranges (NVTX keeps one stack per domain and thread). */

struct nvtx_open {
    uint32_t id; /* the START label (0: not recorded) */
    nvtxDomainHandle_t domain;
};

struct nvtx_thread {
    struct nvtx_open *open; /* malloc'd; freed at thread exit */
    uint32_t depth, cap;
};

static _Thread_local struct nvtx_thread nvtx_self __attribute__((tls_model("initial-exec")));
static pthread_key_t nvtx_key;
static pthread_once_t nvtx_key_once = PTHREAD_ONCE_INIT;
static bool nvtx_key_made;

static void
nvtx_thread_exit(void *open)
{
    /* Ranges still open on a thread that ends stay open in the trace. Forgotten first: a later
     * key destructor of the program may push again (and get a new list, freed in a later round). */
    nvtx_self = (struct nvtx_thread){0};
    free(open);
}

static void
nvtx_make_key(void)
{
    nvtx_key_made = pthread_key_create(&nvtx_key, nvtx_thread_exit) == 0;
}

static bool
nvtx_grow(struct nvtx_thread *t)
{
    pthread_once(&nvtx_key_once, nvtx_make_key);
    if (!nvtx_key_made)
        return false; /* nothing would free the list at the thread's end */
    uint32_t cap = t->cap == 0 ? 16 : t->cap * 2;
    struct nvtx_open *open = realloc(t->open, (size_t)cap * sizeof(*open));
    if (open == NULL)
        return false;
    t->open = open;
    t->cap = cap;
    (void)pthread_setspecific(nvtx_key, open);
    return true;
}

static uint32_t
nvtx_label(const char *text, enum snap_stage stage)
{
    return label_table_intern(runtime_labels(), text, stage);
}

/* NVTX's push: the new range's level among its domain's open ranges, or -1. */
static int
nvtx_push(nvtxDomainHandle_t domain, const char *text)
{
    struct nvtx_thread *t = &nvtx_self;
    if (t->depth == t->cap && !nvtx_grow(t))
        return -1;
    int level = 0;
    for (uint32_t i = 0; i < t->depth; i++)
        level += t->open[i].domain == domain;
    uint32_t id = nvtx_label(text, SNAP_STAGE_START);
    t->open[t->depth++] = (struct nvtx_open){id, domain};
    nvtx_emit(id);
    return level;
}

/* NVTX's pop: the ended range's level, or -1 when the domain has none open on this thread. */
static int
nvtx_pop(nvtxDomainHandle_t domain)
{
    struct nvtx_thread *t = &nvtx_self;
    uint32_t i = t->depth;
    while (i > 0 && t->open[i - 1].domain != domain)
        i--;
    if (i == 0)
        return -1;
    uint32_t id = t->open[i - 1].id;
    memmove(&t->open[i - 1], &t->open[i], (t->depth - i) * sizeof(t->open[0]));
    t->depth--;
    int level = 0;
    for (uint32_t k = 0; k + 1 < i; k++)
        level += t->open[k].domain == domain;
    if (id != 0)
        nvtx_emit(id + 1);
    return level;
}

/* A start/end range's id: its START label in the low half (end = that + 1), and a sequence
 * number above it so that every range has an id of its own. */
static nvtxRangeId_t
nvtx_start(const char *text)
{
    static _Atomic uint32_t sequence;
    uint32_t id = nvtx_label(text, SNAP_STAGE_START);
    nvtx_emit(id);
    uint32_t seq = atomic_fetch_add_explicit(&sequence, 1, memory_order_relaxed) + 1;
    return id == 0 ? 0 : (nvtxRangeId_t)seq << 32 | id;
}

static void
nvtx_end(nvtxRangeId_t range)
{
    uint32_t id = (uint32_t)range;
    if (id != 0)
        nvtx_emit(id + 1);
}

/* ---- The callbacks NVTX calls, one per entry point. */

static void NVTX_API
cb_mark_ex(const nvtxEventAttributes_t *attr)
{
    char buf[NVTX_NAMES_MAX];
    nvtx_emit(nvtx_label(nvtx_names_event(NULL, attr, buf, sizeof buf), SNAP_STAGE_MARK));
}

static void NVTX_API
cb_mark_a(const char *message)
{
    nvtx_emit(nvtx_label(message != NULL ? message : "", SNAP_STAGE_MARK));
}

static void NVTX_API
cb_mark_w(const wchar_t *message)
{
    char buf[NVTX_NAMES_MAX];
    nvtx_names_utf8(message, buf, sizeof buf);
    nvtx_emit(nvtx_label(buf, SNAP_STAGE_MARK));
}

static nvtxRangeId_t NVTX_API
cb_range_start_ex(const nvtxEventAttributes_t *attr)
{
    char buf[NVTX_NAMES_MAX];
    return nvtx_start(nvtx_names_event(NULL, attr, buf, sizeof buf));
}

static nvtxRangeId_t NVTX_API
cb_range_start_a(const char *message)
{
    return nvtx_start(message != NULL ? message : "");
}

static nvtxRangeId_t NVTX_API
cb_range_start_w(const wchar_t *message)
{
    char buf[NVTX_NAMES_MAX];
    nvtx_names_utf8(message, buf, sizeof buf);
    return nvtx_start(buf);
}

static void NVTX_API
cb_range_end(nvtxRangeId_t id)
{
    nvtx_end(id);
}

static int NVTX_API
cb_range_push_ex(const nvtxEventAttributes_t *attr)
{
    char buf[NVTX_NAMES_MAX];
    return nvtx_push(NULL, nvtx_names_event(NULL, attr, buf, sizeof buf));
}

static int NVTX_API
cb_range_push_a(const char *message)
{
    return nvtx_push(NULL, message != NULL ? message : "");
}

static int NVTX_API
cb_range_push_w(const wchar_t *message)
{
    char buf[NVTX_NAMES_MAX];
    nvtx_names_utf8(message, buf, sizeof buf);
    return nvtx_push(NULL, buf);
}

static int NVTX_API
cb_range_pop(void)
{
    return nvtx_pop(NULL);
}

static void NVTX_API
cb_domain_mark_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr)
{
    char buf[NVTX_NAMES_MAX];
    nvtx_emit(nvtx_label(nvtx_names_event(domain, attr, buf, sizeof buf), SNAP_STAGE_MARK));
}

static nvtxRangeId_t NVTX_API
cb_domain_range_start_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr)
{
    char buf[NVTX_NAMES_MAX];
    return nvtx_start(nvtx_names_event(domain, attr, buf, sizeof buf));
}

static void NVTX_API
cb_domain_range_end(nvtxDomainHandle_t domain, nvtxRangeId_t id)
{
    (void)domain;
    nvtx_end(id);
}

static int NVTX_API
cb_domain_range_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr)
{
    char buf[NVTX_NAMES_MAX];
    return nvtx_push(domain, nvtx_names_event(domain, attr, buf, sizeof buf));
}

static int NVTX_API
cb_domain_range_pop(nvtxDomainHandle_t domain)
{
    return nvtx_pop(domain);
}

static nvtxStringHandle_t NVTX_API
cb_register_string_a(nvtxDomainHandle_t domain, const char *text)
{
    (void)domain;
    return nvtx_names_register(text);
}

static nvtxStringHandle_t NVTX_API
cb_register_string_w(nvtxDomainHandle_t domain, const wchar_t *text)
{
    char buf[NVTX_NAMES_MAX];
    (void)domain;
    nvtx_names_utf8(text, buf, sizeof buf);
    return nvtx_names_register(buf);
}

static nvtxDomainHandle_t NVTX_API
cb_domain_create_a(const char *name)
{
    return nvtx_names_domain(name);
}

static nvtxDomainHandle_t NVTX_API
cb_domain_create_w(const wchar_t *name)
{
    char buf[NVTX_NAMES_MAX];
    nvtx_names_utf8(name, buf, sizeof buf);
    return nvtx_names_domain(buf);
}

static void NVTX_API
cb_domain_destroy(nvtxDomainHandle_t domain)
{
    (void)domain; /* kept: a late event naming it must still find its name */
}

/* ---- Attaching to one NVTX instance (every copy of the nvtx3 headers in the process is one). */

#define NVTX_FN(f) ((NvtxFunctionPointer)(f)) /* NVTX casts each back to its own type */

static const struct nvtx_slot {
    NvtxCallbackModule module;
    unsigned id;
    NvtxFunctionPointer fn;
} nvtx_slots[] = {
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkEx, NVTX_FN(cb_mark_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkA, NVTX_FN(cb_mark_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_MarkW, NVTX_FN(cb_mark_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartEx, NVTX_FN(cb_range_start_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartA, NVTX_FN(cb_range_start_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeStartW, NVTX_FN(cb_range_start_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangeEnd, NVTX_FN(cb_range_end)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushEx, NVTX_FN(cb_range_push_ex)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA, NVTX_FN(cb_range_push_a)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushW, NVTX_FN(cb_range_push_w)},
    {NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop, NVTX_FN(cb_range_pop)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainMarkEx, NVTX_FN(cb_domain_mark_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeStartEx, NVTX_FN(cb_domain_range_start_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangeEnd, NVTX_FN(cb_domain_range_end)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx, NVTX_FN(cb_domain_range_push_ex)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop, NVTX_FN(cb_domain_range_pop)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringA, NVTX_FN(cb_register_string_a)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRegisterStringW, NVTX_FN(cb_register_string_w)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA, NVTX_FN(cb_domain_create_a)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateW, NVTX_FN(cb_domain_create_w)},
    {NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainDestroy, NVTX_FN(cb_domain_destroy)},
};

/* Whether this copy of libcuprof.so records: preloaded (NVTX_INJECTION64_PATH alone only
 * dlopens it, and a copy that intercepts nothing stays off: instance.h), not an inert second
 * copy, not in off mode. Says once why not when it was not preloaded. */
bool
nvtx_attachable(void)
{
    if (!instance_preloaded()) {
        static atomic_bool said;
        if (!atomic_exchange(&said, true) && runtime_log_info())
            runtime_log("cuprof: NVTX_INJECTION64_PATH names libcuprof.so, which is not preloaded "
                        "(LD_PRELOAD, or `cuprof run`): NVTX ranges are not recorded");
        return false;
    }
    return runtime_config()->mode != CUPROF_MODE_OFF && !instance_inert();
}

static pthread_once_t nvtx_fork_once = PTHREAD_ONCE_INIT;

/* A fork before the runtime exists (which registers lifecycle's handlers) must not leave the
 * child with a lock another thread held: the same reset, registered at attach time. */
static void
nvtx_register_fork(void)
{
    if (pthread_atfork(NULL, NULL, nvtx_reset_after_fork) != 0 && runtime_log_info())
        runtime_log("cuprof: pthread_atfork failed: a forked child's NVTX calls may deadlock");
}

/* NVTX's documented entry point for a tool: 1 when attached, 0 to leave NVTX's no-ops. */
NVTX_EXPORT int
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    if (get_export_table == NULL || !nvtx_attachable())
        return 0;
    pthread_once(&nvtx_fork_once, nvtx_register_fork);
    const NvtxExportTableCallbacks *cb = get_export_table(NVTX_ETID_CALLBACKS);
    if (cb == NULL || cb->struct_size < sizeof(*cb) || cb->GetModuleFunctionTable == NULL ||
        runtime_labels() == NULL)
        return 0;
    for (size_t i = 0; i < sizeof nvtx_slots / sizeof nvtx_slots[0]; i++) {
        NvtxFunctionTable table = NULL;
        unsigned int size = 0;
        /* An older NVTX has fewer slots: each is checked against the table's own size. */
        if (cb->GetModuleFunctionTable(nvtx_slots[i].module, &table, &size) == 0 || table == NULL ||
            nvtx_slots[i].id >= size || table[nvtx_slots[i].id] == NULL)
            continue;
        *table[nvtx_slots[i].id] = nvtx_slots[i].fn;
    }
    const NvtxExportTableVersionInfo *version = get_export_table(NVTX_ETID_VERSIONINFO);
    if (version != NULL && version->struct_size >= sizeof(*version) &&
        version->SetInjectionNvtxVersion != NULL)
        version->SetInjectionNvtxVersion(NVTX_VERSION);
    return 1;
}

void
nvtx_reset_after_fork(void)
{
    pthread_mutex_init(&nvtx_lock, NULL);
    nvtx_names_reset_after_fork();
    label_table_reset_after_fork(runtime_labels());
}
