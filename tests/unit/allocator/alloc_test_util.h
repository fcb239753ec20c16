/* alloc_test_util.h: helpers for allocator tests: an allocator over the fake device, exact
 *   checks of every memory_stats key, invariant checks, trace expectations.
 * Locking: none (single-threaded tests).
 * Hot path: no. */
#ifndef CUPROF_TEST_ALLOC_TEST_UTIL_H
#define CUPROF_TEST_ALLOC_TEST_UTIL_H

#include <stdint.h>

#include "allocator/allocator.h"
#include "fake_device.h"

#define MIB ((size_t)1 << 20)

struct alloc_fixture {
    struct fake_device fake;
    struct device_ops ops;
    struct trace_sink sink;
    struct alloc_config config;
    struct allocator *alloc;
};

/* Builds an allocator with `conf` (CUPROF_ALLOC_CONF text) over a fake device of `capacity`. */
struct alloc_fixture *fixture_new(const char *conf, size_t capacity, int devices);
void fixture_free(struct alloc_fixture *fx);

/* Asserts every one of the 122 keys: those named in `spec` ("key=value key=value ...") have
 * that value, every other key is 0 (max_split_size: -1 unless named). */
void expect_stats(struct allocator *alloc, int device, const char *spec);
/* Shorthand for one stat array: "name.{all,<pool>}.{current,peak,allocated,freed}" spec text. */
void expect_invariants(struct allocator *alloc);
/* Asserts trace entry i: action, addr, size, stream. */
void expect_trace(const struct fake_device *fake, size_t i, enum trace_action action, uint64_t addr,
                  uint64_t size, uint64_t stream);
uint64_t must_malloc(struct allocator *alloc, int device, size_t size, uint64_t stream);
void must_free(struct allocator *alloc, uint64_t addr);

#endif
