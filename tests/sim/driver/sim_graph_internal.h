/* sim_graph_internal: what sim_graph.c (captures) and sim_graph_exec.c (executable graphs)
 *   share: the graph structures and their lifetime.
 * Lock: sim_graph_lock (the capture lock) guards graph_memory's `instantiated` and the
 *   allocations' hand-over; a graph and its nodes belong to the program's calls on it.
 * Hot path: no. */
#ifndef SIM_GRAPH_INTERNAL_H
#define SIM_GRAPH_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sim_op;

/* The graph allocations of one capture, shared by its graph and the graph's executable copy:
 * they live as long as either (their addresses are fixed for the graph's life). */
struct graph_allocation {
    uintptr_t ptr;
    bool freed_in_graph; /* a free node for it follows in the same graph */
};

struct graph_memory {
    atomic_int refs;
    struct graph_allocation *allocs;
    size_t n, cap;
    bool instantiated; /* a graph with memory nodes has one executable copy at a time */
};

struct CUgraph_st {
    struct sim_op **nodes; /* copies, memsets, host functions, in capture order */
    size_t n, cap;
    struct graph_memory *mem;
};

struct CUgraphExec_st {
    struct sim_op **nodes;
    size_t n;
    struct graph_memory *mem;
    bool auto_free; /* CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH */
};

/* An empty graph with an empty allocation list (NULL on OOM), and its end. */
struct CUgraph_st *sim_graph_new(void);
void sim_graph_free(struct CUgraph_st *g);
void sim_graph_nodes_free(struct sim_op **nodes, size_t n);
/* Drops one holder of the allocations; the last one releases them. */
void sim_graph_memory_unref(struct graph_memory *m);

#endif
