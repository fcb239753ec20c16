/* control_api.c: a program built with cuprof.h: calls every API function and prints the results
 * as key=value lines, so the test can compare a run under the shim with a run without it.
 * Usage: control_api SNAPSHOT_PATH */
#include <stdio.h>
#include <stdlib.h>

#include "control_cuda.h"
#include "preload/cuprof.h"

int
main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: control_api SNAPSHOT_PATH\n");
        return 64;
    }
    control_cuda_init();
    printf("version=%s\n", cuprof_version() != NULL ? cuprof_version() : "none");
    printf("history=%d\n", cuprof_record_memory_history("all", "all", "all", 0));
    printf("history_bad=%d\n", cuprof_record_memory_history("sometimes", NULL, NULL, 0));
    printf("annotate=%d\n", cuprof_annotate("forward"));
    CUdeviceptr a = control_cuda_alloc(3u << 20); /* 3 MiB */
    CUdeviceptr b = control_cuda_alloc(1000);
    printf("allocated=%zu\n", cuprof_memory_allocated(0));
    printf("allocated_current=%zu\n", cuprof_memory_allocated(-1));
    printf("reserved=%zu\n", cuprof_memory_reserved(0));
    control_cuda_free(a);
    printf("allocated_after_free=%zu\n", cuprof_memory_allocated(0));
    printf("max_allocated=%zu\n", cuprof_max_memory_allocated(0));
    printf("max_reserved=%zu\n", cuprof_max_memory_reserved(0));
    printf("reset_peak=%d\n", cuprof_reset_peak_memory_stats(0));
    printf("max_allocated_after_reset=%zu\n", cuprof_max_memory_allocated(0));
    printf("reset_accumulated=%d\n", cuprof_reset_accumulated_memory_stats(0));
    printf("bad_device=%d\n", cuprof_reset_peak_memory_stats(99));
    printf("fraction=%d\n", cuprof_set_per_process_memory_fraction(0.5, 0));
    printf("fraction_bad=%d\n", cuprof_set_per_process_memory_fraction(1.5, 0));
    char *json = cuprof_memory_stats_json(0);
    printf("json=%s\n", json != NULL ? json : "none");
    free(json);
    char *summary = cuprof_memory_summary(0);
    printf("summary_lines=%d\n", summary == NULL ? 0 : 1);
    if (summary != NULL)
        fputs(summary, stderr);
    free(summary);
    printf("dump=%d\n", cuprof_dump_snapshot(argv[1]));
    printf("empty_cache=%d\n", cuprof_empty_cache());
    printf("reserved_after_empty=%zu\n", cuprof_memory_reserved(0));
    printf("history_off=%d\n", cuprof_record_memory_history(NULL, NULL, NULL, 0));
    control_cuda_free(b);
    return 0;
}
