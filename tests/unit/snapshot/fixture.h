/* fixture.h: a small but complete snapshot model for the snapshot unit tests. */
#ifndef CUPROF_TEST_SNAPSHOT_FIXTURE_H
#define CUPROF_TEST_SNAPSHOT_FIXTURE_H

#include "snapshot/snapshot_model.h"

/* Two devices, shared stacks, every action, a pending free, annotate, OOM, settings, cuprof
 * section; `entries` extra alloc/free pairs on device 0 (each pair with one of `stacks`
 * distinct stacks) for batch and memo tests. NULL on failure. */
struct snapshot *fixture_model(size_t entries, size_t stacks);

#endif
