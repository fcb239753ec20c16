/* path_template.c: CUPROF_SNAPSHOT expansion and non-overwriting names. */
#include "preload/path_template.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator/cuprof_errors.h"

/* Keeps [A-Za-z0-9._-]: a value from the environment or the host name never adds a directory. */
static void
path_template_sanitize(char *text)
{
    for (char *c = text; *c != '\0'; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-';
        if (!ok)
            *c = '_';
    }
}

/* The first rank variable set (launchers: torchrun, Open MPI, MPICH/PMI, Slurm), or NULL. */
static const char *
path_template_rank_text(void)
{
    static const char *const names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *value = getenv(names[i]);
        if (value != NULL && *value != '\0')
            return value;
    }
    return NULL;
}

int64_t
path_template_rank_value(void)
{
    const char *text = path_template_rank_text();
    int64_t value = 0;
    if (text == NULL)
        return -1;
    for (const char *c = text; *c != '\0'; c++) {
        if (*c < '0' || *c > '9' || value > (INT64_MAX - 9) / 10)
            return -1;
        value = value * 10 + (*c - '0');
    }
    return value;
}

void
path_template_rank(char *out, size_t out_len)
{
    const char *rank = path_template_rank_text();
    snprintf(out, out_len, "%.63s", rank == NULL ? "0" : rank);
    path_template_sanitize(out);
}

int
path_template_expand(const char *tmpl, uint64_t seq, int64_t now, char *out, size_t out_len)
{
    size_t used = 0;
    if (out_len == 0)
        return -CUPROF_EINVAL;
    for (const char *p = tmpl; *p != '\0'; p++) {
        char piece[256];
        if (*p != '%') {
            piece[0] = *p;
            piece[1] = '\0';
        } else {
            p++;
            switch (*p) {
            case 'p':
                snprintf(piece, sizeof piece, "%ld", (long)getpid());
                break;
            case 'r':
                path_template_rank(piece, sizeof piece);
                break;
            case 'h':
                if (gethostname(piece, sizeof piece) != 0)
                    snprintf(piece, sizeof piece, "unknown");
                piece[sizeof piece - 1] = '\0';
                path_template_sanitize(piece);
                break;
            case 'n':
                snprintf(piece, sizeof piece, "%" PRIu64, seq);
                break;
            case 't':
                snprintf(piece, sizeof piece, "%" PRId64, now);
                break;
            case '%':
                snprintf(piece, sizeof piece, "%%");
                break;
            default: /* includes the NUL after a trailing '%' */
                return -CUPROF_EINVAL;
            }
        }
        size_t n = strlen(piece);
        if (used + n >= out_len)
            return -CUPROF_EINVAL;
        memcpy(out + used, piece, n);
        used += n;
    }
    out[used] = '\0';
    return 0;
}
