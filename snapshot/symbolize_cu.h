/* symbolize_cu.h: per-compilation-unit index of function scopes (subprograms and inlined
 *   subroutines with their pc ranges), built with one DIE walk per CU, so each address costs a
 *   range scan instead of a walk of the whole CU (dwarf_getscopes) per inlining level.
 * Locking: none: owned by one symbolizer (one thread).
 * Hot path: no (dump time). */
#ifndef CUPROF_SYMBOLIZE_CU_H
#define CUPROF_SYMBOLIZE_CU_H

#include "snapshot/dw_api.h"

struct cu_index_set;

/* dw: the loaded libdw table (dw_api_get() != NULL). */
struct cu_index_set *cu_index_set_create(const struct dw_api *dw);
void cu_index_set_destroy(struct cu_index_set *set);

/* The function DIEs containing pc (a DWARF address: module address minus bias) in the concrete
 * tree of cudie, innermost first: inlined_subroutine* then the subprogram they were inlined into.
 * Writes at most cap DIEs; returns how many, 0 when no function covers pc, -1 when out of memory.
 */
__attribute__((warn_unused_result)) int cu_index_functions(struct cu_index_set *set,
                                                           Dwarf_Die *cudie, Dwarf_Addr pc,
                                                           Dwarf_Die *out, int cap);

#endif
