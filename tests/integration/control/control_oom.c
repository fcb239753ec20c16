/* control_oom.c: allocates 1 GiB blocks until the device is out of memory; at the moment the
 * error comes back, reports whether a snapshot already exists in DIR.
 * Usage: control_oom DIR */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "control_cuda.h"

static int
count_snapshots(const char *dir)
{
    int count = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] != '.' && n > 7 && strcmp(e->d_name + n - 7, ".pickle") == 0)
            count++;
    }
    closedir(d);
    return count;
}

int
main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: control_oom DIR\n");
        return 64;
    }
    control_cuda_init();
    for (int i = 0; i < 100000; i++) {
        CUdeviceptr ptr;
        CUresult rc = cuMemAlloc(&ptr, (size_t)1 << 30);
        if (rc != CUDA_SUCCESS) {
            int snapshots = count_snapshots(argv[1]);
            printf("blocks=%d error=%d snapshots_at_error=%d\n", i, (int)rc, snapshots);
            return 0;
        }
    }
    printf("no out-of-memory\n");
    return 1;
}
