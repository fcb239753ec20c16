/* plot_answers.c: explain's verdicts and diff's text for the report page (see plot_answers.h). */
#include "cli/plot_answers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/trace_sink.h"
#include "cli/cli_util.h"
#include "cli/diff_print.h"
#include "cli/explain.h"
#include "cli/explain_print.h"
#include "cli/frame_filter.h"
#include "cli/run_diff.h"
#include "snapshot/emitter.h"
#include "snapshot/snapshot_oom.h"

/* What a stream printer wrote, as a string (NULL when host memory ran out). */
struct captured {
    char *text;
    size_t len;
    FILE *f;
};

static bool
capture_begin(struct captured *c)
{
    c->text = NULL;
    c->len = 0;
    c->f = open_memstream(&c->text, &c->len);
    return c->f != NULL;
}

static char *
capture_end(struct captured *c)
{
    if (fclose(c->f) != 0) {
        free(c->text);
        return NULL;
    }
    return c->text;
}

/* The verdict's kinds in words: "fragmentation", "a combination: outside, fragmentation". */
static void
verdict_kinds(unsigned v, char *out, size_t len)
{
    static const struct {
        unsigned flag;
        const char *name;
    } kinds[] = {{EXPLAIN_LIVE_EXCEEDS, "live memory exceeds the device"},
                 {EXPLAIN_OUTSIDE, "memory outside the allocator"},
                 {EXPLAIN_CAP, "a cap"},
                 {EXPLAIN_FRAGMENTATION, "fragmentation"},
                 {EXPLAIN_DRIVER, "the driver refused"},
                 {EXPLAIN_DRIVER_OWN, "the driver's own memory"}};
    size_t used = 0;
    out[0] = '\0';
    if (__builtin_popcount(v) > 1)
        used += (size_t)snprintf(out, len, "a combination: ");
    for (size_t k = 0, n = 0; k < sizeof kinds / sizeof kinds[0] && used < len; k++)
        if (v & kinds[k].flag)
            used +=
                (size_t)snprintf(out + used, len - used, "%s%s", n++ ? ", " : "", kinds[k].name);
}

/* One OOM: explain's answer at its entry (`driver`: row `entry` of cuprof.oom_messages, a driver's
 * own call), or nothing when it cannot be computed (the page then shows the OOM without a
 * verdict). */
static int
emit_verdict(struct emitter *e, const struct snapshot *snap, size_t device, size_t entry,
             bool driver)
{
    struct explain_request req = {.device = device,
                                  .at = driver ? EXPLAIN_AT_DRIVER : EXPLAIN_AT_ENTRY,
                                  .entry = entry,
                                  .top = 3};
    struct explain x;
    char err[512];
    if (explain_compute(snap, &req, &x, err, sizeof err) != 0)
        return 0;
    struct captured c;
    char *text = NULL;
    if (capture_begin(&c)) {
        explain_print_answer(c.f, &x);
        text = capture_end(&c);
    }
    if (text == NULL) {
        explain_free(&x);
        return -1;
    }
    char kinds[256];
    verdict_kinds(x.verdict, kinds, sizeof kinds);
    /* The sentences after "verdict: ", and the table of what would have avoided it. */
    const char *body = strncmp(text, "verdict: ", 9) == 0 ? text + 9 : text;
    emitter_begin_dict(e);
    cli_json_key_u64(e, "device", device);
    if (driver) /* the state it met: after `at` entries */
        cli_json_key_u64(e, "driver_at", x.at);
    else
        cli_json_key_u64(e, "entry", entry);
    cli_json_key_string(e, "verdict", kinds);
    cli_json_key_string(e, "text", body);
    emitter_end(e);
    free(text);
    explain_free(&x);
    return 0;
}

static int
oom_verdicts(struct emitter *e, const struct snapshot *snap)
{
    emitter_key(e, "oom_verdicts");
    emitter_begin_list(e);
    int rc = 0;
    for (size_t d = 0; rc == 0 && d < snap->device_count; d++) {
        const struct snap_device_trace *t = &snap->device_traces[d];
        for (size_t i = 0, n = 0; rc == 0 && i < t->count && n < PLOT_ANSWERS_OOMS_MAX; i++)
            if (t->entries[i].action == TRACE_OOM) {
                rc = emit_verdict(e, snap, d, i, false);
                n++;
            }
    }
    /* The driver's own calls refused (no entry of their own), the first ones. */
    for (size_t r = 0, n = 0; rc == 0 && r < snap->cuprof.oom_message_count; r++) {
        const struct snap_oom_message *m = &snap->cuprof.oom_messages[r];
        if (m->api == NULL || m->trace_index < 0 || n >= PLOT_ANSWERS_OOMS_MAX)
            continue;
        rc = emit_verdict(e, snap, (size_t)m->device, r, true);
        n++;
    }
    emitter_end(e);
    return rc;
}

/* diff's text for the two files, read again as `cuprof diff` reads them (its call sites filtered
 * unless all_frames), so the page says what the command says. */
static int
two_runs(struct emitter *e, char *const *paths, bool all_frames)
{
    struct snapshot *a = NULL, *b = NULL;
    if (strcmp(paths[0], "-") == 0 || strcmp(paths[1], "-") == 0)
        return 0; /* standard input cannot be read again: the page shows its own comparison */
    if (frame_filter_load(paths[0], all_frames, &a) != CLI_OK ||
        frame_filter_load(paths[1], all_frames, &b) != CLI_OK) {
        snapshot_free(a);
        return -1;
    }
    struct run_diff diff;
    if (run_diff_make(a, b, &diff) != 0) {
        snapshot_free(a);
        snapshot_free(b);
        return -1;
    }
    struct captured c;
    char *text = NULL;
    if (capture_begin(&c)) {
        bool ok = diff_print_text(c.f, &diff, 10, a, b, paths);
        text = capture_end(&c);
        if (!ok) {
            free(text);
            text = NULL;
        }
    }
    run_diff_free(&diff);
    snapshot_free(a);
    snapshot_free(b);
    if (text == NULL)
        return -1;
    emitter_key(e, "diff");
    emitter_begin_dict(e);
    cli_json_key_string(e, "summary", text);
    emitter_end(e);
    free(text);
    return 0;
}

const struct plot_extras plot_answers = {oom_verdicts, two_runs};
