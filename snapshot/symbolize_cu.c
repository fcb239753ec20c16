/* symbolize_cu.c: function-scope index per compilation unit (see symbolize_cu.h). */
#include "snapshot/symbolize_cu.h"

#include <dwarf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct fn_node {
    Dwarf_Off die;  /* offset of the subprogram / inlined_subroutine DIE */
    int32_t parent; /* enclosing function node in the concrete tree, or -1 */
    int32_t depth;
};

struct fn_range {
    Dwarf_Addr lo, hi; /* [lo, hi) */
    int32_t node;
};

struct cu_index {
    const struct dw_api *dw;
    Dwarf *dbg;
    Dwarf_Off cu_off;
    struct fn_node *nodes;
    size_t node_count, node_cap;
    struct fn_range *ranges; /* sorted by lo */
    size_t range_count, range_cap;
};

struct cu_index_set {
    const struct dw_api *dw;
    struct cu_index *cus;
    size_t count, cap;
    size_t last; /* consecutive return addresses usually share a CU */
};

struct cu_index_set *
cu_index_set_create(const struct dw_api *dw)
{
    struct cu_index_set *set = calloc(1, sizeof(*set));
    if (set != NULL)
        set->dw = dw;
    return set;
}

void
cu_index_set_destroy(struct cu_index_set *set)
{
    if (set == NULL)
        return;
    for (size_t i = 0; i < set->count; i++) {
        free(set->cus[i].nodes);
        free(set->cus[i].ranges);
    }
    free(set->cus);
    free(set);
}

static bool
grow(void **items, size_t *cap, size_t count, size_t size)
{
    if (count < *cap)
        return true;
    size_t n = *cap == 0 ? 64 : *cap * 2;
    void *p = realloc(*items, n * size);
    if (p == NULL)
        return false;
    *items = p;
    *cap = n;
    return true;
}

/* Adds every function DIE with pc ranges below `die`; `parent` is the innermost such function
 * around it. Recursion depth is the DIE nesting depth, which compilers keep small. */
static bool
index_walk(struct cu_index *ix, Dwarf_Die *die, int32_t parent, int32_t depth)
{
    const struct dw_api *dw = ix->dw;
    Dwarf_Die child;
    if (dw->dwarf_child(die, &child) != 0)
        return true;
    do {
        int tag = dw->dwarf_tag(&child);
        int32_t inner = parent;
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
            Dwarf_Addr base, lo, hi;
            ptrdiff_t off = 0;
            int32_t node = -1;
            while ((off = dw->dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
                if (hi <= lo)
                    continue;
                if (node < 0) {
                    if (!grow((void **)&ix->nodes, &ix->node_cap, ix->node_count,
                              sizeof(*ix->nodes)))
                        return false;
                    node = (int32_t)ix->node_count++;
                    ix->nodes[node] = (struct fn_node){dw->dwarf_dieoffset(&child), parent, depth};
                }
                if (!grow((void **)&ix->ranges, &ix->range_cap, ix->range_count,
                          sizeof(*ix->ranges)))
                    return false;
                ix->ranges[ix->range_count++] = (struct fn_range){lo, hi, node};
            }
            if (node >= 0)
                inner = node;
        }
        if (dw->dwarf_haschildren(&child) > 0 && !index_walk(ix, &child, inner, depth + 1))
            return false;
    } while (dw->dwarf_siblingof(&child, &child) == 0);
    return true;
}

static int
range_cmp(const void *a, const void *b)
{
    const struct fn_range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static struct cu_index *
cu_index_get(struct cu_index_set *set, Dwarf_Die *cudie)
{
    const struct dw_api *dw = set->dw;
    Dwarf *dbg = dw->dwarf_cu_getdwarf(cudie->cu);
    Dwarf_Off off = dw->dwarf_dieoffset(cudie);
    if (set->last < set->count && set->cus[set->last].dbg == dbg &&
        set->cus[set->last].cu_off == off)
        return &set->cus[set->last];
    for (size_t i = 0; i < set->count; i++) {
        if (set->cus[i].dbg == dbg && set->cus[i].cu_off == off) {
            set->last = i;
            return &set->cus[i];
        }
    }
    if (!grow((void **)&set->cus, &set->cap, set->count, sizeof(*set->cus)))
        return NULL;
    struct cu_index *ix = &set->cus[set->count];
    *ix = (struct cu_index){.dw = dw, .dbg = dbg, .cu_off = off};
    if (!index_walk(ix, cudie, -1, 0)) {
        free(ix->nodes);
        free(ix->ranges);
        return NULL;
    }
    qsort(ix->ranges, ix->range_count, sizeof(*ix->ranges), range_cmp);
    set->last = set->count++;
    return ix;
}

int
cu_index_functions(struct cu_index_set *set, Dwarf_Die *cudie, Dwarf_Addr pc, Dwarf_Die *out,
                   int cap)
{
    struct cu_index *ix = cu_index_get(set, cudie);
    if (ix == NULL)
        return -1;
    /* The deepest function whose range holds pc is the innermost; ranges start at or before pc. */
    int32_t best = -1;
    for (size_t i = 0; i < ix->range_count && ix->ranges[i].lo <= pc; i++) {
        const struct fn_range *r = &ix->ranges[i];
        if (pc < r->hi && (best < 0 || ix->nodes[r->node].depth > ix->nodes[best].depth))
            best = r->node;
    }
    const struct dw_api *dw = set->dw;
    int n = 0;
    for (int32_t node = best; node >= 0 && n < cap; node = ix->nodes[node].parent) {
        if (dw->dwarf_offdie(ix->dbg, ix->nodes[node].die, &out[n]) == NULL)
            break;
        n++;
        if (dw->dwarf_tag(&out[n - 1]) == DW_TAG_subprogram)
            break;
    }
    return n;
}
