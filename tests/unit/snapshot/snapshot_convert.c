/* snapshot_convert.c: test tool: reads any snapshot file and writes it again (format from the
 * output name). Usage: snapshot_convert IN OUT; prints the reader's one-line error and exits 1. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "snapshot/snapshot_read.h"
#include "snapshot/snapshot_write.h"

int
main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: snapshot_convert IN OUT\n");
        return 2;
    }
    struct snapshot *s = NULL;
    char err[512];
    if (snapshot_read_file(argv[1], &s, err, sizeof(err)) != 0) {
        fprintf(stderr, "cuprof: %s\n", err);
        return 1;
    }
    for (size_t i = 0; i < s->warning_count; i++)
        fprintf(stderr, "cuprof: %s\n", s->warnings[i]);
    int rc = snapshot_write_file(argv[2], s, SNAPSHOT_FORMAT_AUTO, FILE_PUBLISH_REPLACE, NULL, 0);
    if (rc != 0)
        fprintf(stderr, "cuprof: %s: cannot write: %s\n", argv[2], strerror(errno));
    snapshot_free(s);
    return rc != 0;
}
