/* Test helper: reads "key value" lines (flat memory_stats), prints memory_summary for
 * argv[1] = device and argv[2] = 0/1 abbreviated, then a line "JSON" and stats_json's text. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats/memory_summary.h"
#include "stats/stats_json.h"

int
main(int argc, char **argv)
{
    static char keys[256][80];
    static struct memory_stat_kv kv[256];
    size_t n = 0;
    char key[80];
    long long value;

    if (argc != 3) {
        fprintf(stderr, "cuprof: usage: stats_tool DEVICE ABBREVIATED < key-value lines\n");
        return 2;
    }
    while (n < 256 && scanf("%79s %lld", key, &value) == 2) {
        memcpy(keys[n], key, sizeof(key));
        kv[n].key = keys[n];
        kv[n].value = (int64_t)value;
        n++;
    }
    struct memory_stats stats;
    if (memory_stats_from_flat(kv, n, &stats) != n) {
        fprintf(stderr, "cuprof: unknown key in input\n");
        return 1;
    }
    static char buf[65536];
    memory_summary(&stats, atoi(argv[1]), atoi(argv[2]) != 0, buf, sizeof(buf));
    fputs(buf, stdout);
    stats_json(&stats, buf, sizeof(buf));
    printf("JSON\n%s\n", buf);
    return 0;
}
