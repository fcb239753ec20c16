/* lock_order.h: the one order in which cuprof's locks nest. A thread holding a lock may take only
 *   locks further down this list; a leaf lock is never held while another is taken.
 * Locking: this is the list, nothing here takes a lock.
 * Hot path: no code; ALLOC_ASSERT_HELD (alloc_lock.h) checks the device lock in debug builds.
 *
 *   1. Dump lock (preload/dumper.c `dumper_lock`): one snapshot at a time; held while the dump
 *      copies each device's state, so it comes before every device lock.
 *   2. Device locks (allocator/alloc_lock.h, one per device, `dev->lock`): taken in device order
 *      when several are held (the fork handlers, a dump copying devices one by one takes them one
 *      at a time). Everything an allocator event touches runs under it: the trace sinks
 *      (preload/library_usage.c's counters, the history ring's record call).
 *   3. History ring lock (snapshot/trace_ring.c, one per device `lock`; then `mode_lock`,
 *      `label_lock`): taken by the ring sink under a device lock; never takes a device lock.
 *   4. Stack-table locks (snapshot/stacks.c `g_insert_lock`, snapshot/python_frames.c
 *      `g_insert_lock`, `g_discover_lock`): taken to intern a new stack, which happens before the
 *      allocator is entered, never under a device lock on the hot path.
 *   5. Side tables, leaves (preload/addr_map.h `lock` of the owned-segment, VMM-handle and usage
 *      maps; preload/library_table.c `table_lock`; preload/layers.c `rebind_lock`;
 *      preload/oom_log.c `oom_lock`): each held for a lookup or an insert and nothing else.
 *
 * The fork handlers (preload/lifecycle.c) take 1, then every 2 in device order, then the leaves
 * of 5, and release them in the reverse order. */
#ifndef CUPROF_LOCK_ORDER_H
#define CUPROF_LOCK_ORDER_H
#endif
