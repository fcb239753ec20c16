/* path_template.h: expands CUPROF_SNAPSHOT templates (%p %r %h %n %t %%) and picks the name that
 *   never overwrites an earlier snapshot.
 * Locking: none (pure functions over their arguments and the process's pid/host/environment).
 * Hot path: no (dump time only). */
#ifndef CUPROF_PATH_TEMPLATE_H
#define CUPROF_PATH_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

/* The process's rank: the first of RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID that is
 * set and non-empty, else "0" (a process outside any launcher is rank 0, as torch.distributed
 * counts). Characters other than [A-Za-z0-9._-] become '_' so a rank never adds a directory. */
void path_template_rank(char *out, size_t out_len);

/* The rank as a number for the snapshot's cuprof.rank: -1 when no rank variable is set (or the
 * first one set is not a plain decimal number). */
int64_t path_template_rank_value(void);

/* Expands `tmpl`: %p pid, %r rank, %h host name, %n `seq`, %t unix time `now`, %% a percent.
 * Returns 0, or -CUPROF_EINVAL for an unknown escape or when the result does not fit in out. */
__attribute__((warn_unused_result)) int
path_template_expand(const char *tmpl, uint64_t seq, int64_t now, char *out, size_t out_len);

#endif
