/* test_loader_gate.c: a fork waits for the loader walks under way and holds new ones back, never
 * for its own thread's, never past LOADER_GATE_WAIT_MS; and libunwind's dl_iterate_phdr is bound
 * to the gate once stacks.c has chosen it. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "snapshot/elf_imports.h"
#include "snapshot/loader_gate.h"
#include "snapshot/stacks.h"

static sem_t g_inside;
static atomic_bool g_walk_done;
static atomic_int g_stall_ms;

/* Milliseconds since `start` (CLOCK_MONOTONIC). */
static double
ms_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) * 1e3 +
           (double)(now.tv_nsec - start->tv_nsec) / 1e6;
}

static void
sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Stops in the first object's callback, as a slow walker would, holding the loader's lock. */
static int
slow_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    (void)data;
    sem_post(&g_inside);
    sleep_ms(atomic_load(&g_stall_ms));
    return 1;
}

static void *
slow_walker(void *arg)
{
    (void)arg;
    loader_gate_iterate(slow_cb, NULL);
    atomic_store(&g_walk_done, true);
    return NULL;
}

static void
start_slow_walk(pthread_t *thread, int stall_ms)
{
    atomic_store(&g_walk_done, false);
    atomic_store(&g_stall_ms, stall_ms);
    assert_int_equal(pthread_create(thread, NULL, slow_walker, NULL), 0);
    assert_int_equal(sem_wait(&g_inside), 0);
}

static void
test_fork_waits_for_walk_under_way(void **state)
{
    (void)state;
    pthread_t thread;
    start_slow_walk(&thread, 200);
    loader_gate_close_for_fork();
    assert_true(atomic_load(&g_walk_done));
    loader_gate_open_after_fork();
    pthread_join(thread, NULL);
}

static atomic_bool g_entered;

static void *
late_walker(void *arg)
{
    (void)arg;
    loader_gate_enter();
    atomic_store(&g_entered, true);
    loader_gate_leave();
    return NULL;
}

static void
test_closed_gate_holds_new_walks(void **state)
{
    (void)state;
    atomic_store(&g_entered, false);
    loader_gate_close_for_fork(); /* nothing under way: returns at once */
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, late_walker, NULL), 0);
    sleep_ms(100);
    assert_false(atomic_load(&g_entered));
    loader_gate_open_after_fork();
    pthread_join(thread, NULL);
    assert_true(atomic_load(&g_entered));
}

static double g_close_ms;

static int
fork_from_inside_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    (void)data;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    loader_gate_close_for_fork();
    g_close_ms = ms_since(&t0);
    loader_gate_open_after_fork();
    return 1;
}

static void
test_fork_never_waits_for_its_own_walk(void **state)
{
    (void)state;
    g_close_ms = -1;
    loader_gate_iterate(fork_from_inside_cb, NULL);
    assert_true(g_close_ms >= 0 && g_close_ms < LOADER_GATE_WAIT_MS / 2);
}

static void
test_fork_waits_no_longer_than_the_bound(void **state)
{
    (void)state;
    pthread_t thread;
    start_slow_walk(&thread, LOADER_GATE_WAIT_MS * 3);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    loader_gate_close_for_fork();
    double waited = ms_since(&t0);
    assert_false(atomic_load(&g_walk_done));
    assert_true(waited >= LOADER_GATE_WAIT_MS * 0.9);
    loader_gate_open_after_fork();
    pthread_join(thread, NULL);
}

struct import_query {
    void *slot_value;
    unsigned count;
};

static bool
find_iterate(void **slot, const char *name, void *context)
{
    struct import_query *q = context;
    if (strcmp(name, "dl_iterate_phdr") == 0) {
        q->slot_value = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        q->count++;
    }
    return true;
}

static void
test_libunwind_walks_through_the_gate(void **state)
{
    (void)state;
    if (stacks_unwinder() != STACKS_UNWINDER_LIBUNWIND)
        skip(); /* libunwind.so.8 is not installed (or hidden): nothing to rebind */
    void *lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(lib);
    struct elf_image image;
    assert_true(elf_image_of_handle(lib, &image));
    struct import_query q = {NULL, 0};
    elf_imports_each(&image, find_iterate, &q);
    assert_true(q.count >= 1);
    loader_gate_iterate_fn gate = loader_gate_iterate;
    void *want;
    memcpy(&want, &gate, sizeof want);
    assert_ptr_equal(q.slot_value, want);
    dlclose(lib);
}

int
main(void)
{
    sem_init(&g_inside, 0, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_waits_for_walk_under_way),
        cmocka_unit_test(test_closed_gate_holds_new_walks),
        cmocka_unit_test(test_fork_never_waits_for_its_own_walk),
        cmocka_unit_test(test_fork_waits_no_longer_than_the_bound),
        cmocka_unit_test(test_libunwind_walks_through_the_gate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
