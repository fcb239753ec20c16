/* check_report.c: check's results in words, and the three ways of writing them. */
#include "cli/check_report.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "cli/out_file.h"
#include "snapshot/snapshot_oom.h"

#define LINE_MAX_TEXT 4096

void
check_report_init(struct check_report *rep, const struct check_budgets *budgets,
                  const char *baseline, char *const *paths, size_t count)
{
    memset(rep, 0, sizeof(*rep));
    rep->budgets = *budgets;
    rep->baseline = baseline;
    rep->paths = paths;
    rep->count = count;
}

static struct check_entry *
grow(struct check_report *rep)
{
    if (rep->n == rep->cap) {
        size_t cap = rep->cap ? rep->cap * 2 : 16;
        struct check_entry *v = realloc(rep->v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        rep->v = v;
        rep->cap = cap;
    }
    struct check_entry *e = &rep->v[rep->n];
    memset(e, 0, sizeof(*e));
    return e;
}

int
check_report_unreadable(struct check_report *rep, size_t file)
{
    struct check_entry *e = grow(rep);
    if (e == NULL)
        return -1;
    e->file = file;
    e->unreadable = true;
    rep->n++;
    rep->unreadable++;
    return 0;
}

/* ---- Words ----------------------------------------------------------------------------------- */

static const char *
signed_size(int64_t v, char *buf, size_t len)
{
    char s[32];
    snprintf(buf, len, "%s%s", v >= 0 ? "+" : "-",
             cli_size(v >= 0 ? (uint64_t)v : 0 - (uint64_t)v, s, sizeof s));
    return buf;
}

/* "(+151.5%)" of growth over base, or "(the baseline had none)". */
static const char *
percent(int64_t growth, uint64_t base, char *buf, size_t len)
{
    if (base > 0)
        snprintf(buf, len, "(%+.1f%%)", 100.0 * (double)growth / (double)base);
    else
        snprintf(buf, len, "(the baseline had none)");
    return buf;
}

/* "+151.5%" of growth over base, or "all" when the base was 0. */
static const char *
site_share(int64_t growth, uint64_t base, char *buf, size_t len)
{
    if (base > 0)
        snprintf(buf, len, "%+.1f%%", 100.0 * (double)growth / (double)base);
    else
        snprintf(buf, len, "all");
    return buf;
}

/* "; the call site that grew most at the peak: +100.00 MiB, SITE" (with a baseline), or
 * "; the largest call site at the peak: 100.00 MiB, SITE". */
static void
grew_most(char *buf, size_t len, const struct check_report *rep, const struct check_result *r,
          const char *site)
{
    char s[48];
    if (site == NULL)
        snprintf(buf, len, "%s", "");
    else if (rep->baseline != NULL)
        snprintf(buf, len, "; the call site that grew most at the peak: %s, %s",
                 signed_size(r->stack_growth, s, sizeof s), site);
    else
        snprintf(buf, len, "; the largest call site at the peak: %s, %s",
                 cli_size(r->stack_bytes, s, sizeof s), site);
}

static void
word_peak(char *buf, size_t len, const char *what, const char *budget, const struct check_result *r,
          const char *most)
{
    char v[32], by[32];
    if (r->crossed)
        snprintf(buf, len, "peak %s %s over %s (by %s)%s", what, cli_size(r->value, v, sizeof v),
                 budget, cli_size(r->value - r->limit, by, sizeof by), most);
    else
        snprintf(buf, len, "peak %s %s within %s", what, cli_size(r->value, v, sizeof v), budget);
}

static void
word_growth(char *buf, size_t len, const struct check_report *rep, const char *what,
            const char *budget, const struct check_result *r, const char *most)
{
    char g[48], p[40], b[32], v[32], safe[1024];
    const char *base = cli_term(rep->baseline, safe, sizeof safe);
    snprintf(buf, len, "peak %s grew %s %s from %s (%s -> %s), %s %s%s", what,
             signed_size(r->growth, g, sizeof g), percent(r->growth, r->base, p, sizeof p), base,
             cli_size(r->base, b, sizeof b), cli_size(r->value, v, sizeof v),
             r->crossed ? "over" : "within", budget, r->crossed ? most : "");
}

static void
word_site(char *buf, size_t len, const struct check_report *rep, const char *budget,
          const struct check_result *r, const char *site)
{
    char g[48], p[40], safe[1024];
    const char *base = cli_term(rep->baseline, safe, sizeof safe);
    if (site == NULL || r->growth <= 0)
        snprintf(buf, len, "no call site grew at the peak, within %s", budget);
    else
        snprintf(buf, len, "a call site grew %s at the peak (%s of %s's peak allocated), %s %s: %s",
                 signed_size(r->growth, g, sizeof g), site_share(r->growth, r->base, p, sizeof p),
                 base, r->crossed ? "over" : "within", budget, site);
}

static void
word_leaks(char *buf, size_t len, const struct check_result *r, const char *site)
{
    char v[32], s[32];
    if (!r->crossed)
        snprintf(buf, len, "no block still allocated at the end, --no-leaks");
    else
        snprintf(buf, len,
                 "%zu block%s (%s) still allocated at the end, --no-leaks; the largest call "
                 "site: %s, %s",
                 r->count, r->count == 1 ? "" : "s", cli_size(r->value, v, sizeof v),
                 cli_size(r->stack_bytes, s, sizeof s), site != NULL ? site : "[no stack]");
}

static void
word_oom(char *buf, size_t len, const struct check_result *r, const char *site)
{
    char s[32];
    if (!r->crossed)
        snprintf(buf, len, "no OOM, --no-oom");
    else if (r->driver_call != NULL)
        snprintf(buf, len,
                 "%zu OOM%s, --no-oom; the first: %s found no device memory for the driver itself "
                 "(" SNAP_DRIVER_OWN_MEMORY ") after %zu entries",
                 r->count, r->count == 1 ? "" : "s", r->driver_call, r->driver_at);
    else
        snprintf(buf, len, "%zu OOM%s, --no-oom; the first: %s requested at entry %zu: %s",
                 r->count, r->count == 1 ? "" : "s", cli_size(r->size, s, sizeof s), r->entry,
                 site != NULL ? site : "[no stack recorded]");
}

int
check_report_add(struct check_report *rep, size_t file, const struct snapshot *snap,
                 const struct check_result *r)
{
    struct check_entry *e = grow(rep);
    if (e == NULL)
        return -1;
    char site[2048], budget[128], most[LINE_MAX_TEXT], text[LINE_MAX_TEXT];
    bool has_site = r->stack != 0;
    if (has_site)
        cli_site_name(snap, r->stack, 3, site, sizeof site);
    const char *s = has_site ? site : NULL;
    check_budget_name(&rep->budgets, r->kind, budget, sizeof budget);
    grew_most(most, sizeof most, rep, r, s);
    switch (r->kind) {
    case CHECK_PEAK_RESERVED:
        word_peak(text, sizeof text, "reserved", budget, r, most);
        break;
    case CHECK_PEAK_ALLOCATED:
        word_peak(text, sizeof text, "allocated", budget, r, most);
        break;
    case CHECK_GROWTH_ALLOCATED:
        word_growth(text, sizeof text, rep, "allocated", budget, r, most);
        break;
    case CHECK_GROWTH_RESERVED:
        word_growth(text, sizeof text, rep, "reserved", budget, r, most);
        break;
    case CHECK_GROWTH_SITE:
        word_site(text, sizeof text, rep, budget, r, s);
        break;
    case CHECK_LEAKS:
        word_leaks(text, sizeof text, r, s);
        break;
    case CHECK_OOM:
        word_oom(text, sizeof text, r, s);
        break;
    }
    e->file = file;
    e->r = *r;
    e->message = strdup(text);
    e->site = has_site ? strdup(site) : NULL;
    if (e->message == NULL || (has_site && e->site == NULL)) {
        free(e->message);
        free(e->site);
        return -1;
    }
    rep->n++;
    rep->crossed += r->crossed;
    return 0;
}

void
check_report_free(struct check_report *rep)
{
    for (size_t i = 0; i < rep->n; i++) {
        free(rep->v[i].message);
        free(rep->v[i].site);
    }
    free(rep->v);
    rep->v = NULL;
    rep->n = rep->cap = 0;
}

/* ---- Text ------------------------------------------------------------------------------------ */

/* The budgets asked for, as options: "--max-peak-reserved 10.00 GiB, --no-leaks". */
static void
budget_list(const struct check_budgets *b, char *buf, size_t len)
{
    static const struct {
        enum check_kind kind;
        size_t offset;
    } set[] = {
        {CHECK_PEAK_RESERVED, offsetof(struct check_budgets, max_peak_reserved_set)},
        {CHECK_PEAK_ALLOCATED, offsetof(struct check_budgets, max_peak_allocated_set)},
        {CHECK_GROWTH_ALLOCATED, offsetof(struct check_budgets, max_growth_set)},
        {CHECK_LEAKS, offsetof(struct check_budgets, no_leaks)},
        {CHECK_OOM, offsetof(struct check_budgets, no_oom)},
    };
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof set / sizeof set[0] && used < len; i++) {
        if (!*(const bool *)((const char *)b + set[i].offset))
            continue;
        char name[128];
        int w = snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                         check_budget_name(b, set[i].kind, name, sizeof name));
        used += w > 0 ? (size_t)w : 0;
    }
}

bool
check_report_text(const struct check_report *rep, FILE *out)
{
    size_t files_crossed = 0, last = SIZE_MAX;
    for (size_t i = 0; i < rep->n; i++) {
        const struct check_entry *e = &rep->v[i];
        if (e->unreadable || !e->r.crossed)
            continue;
        cli_fputs_term(rep->paths[e->file], out);
        fprintf(out, ": device %zu: %s\n", e->r.device, e->message);
        files_crossed += e->file != last;
        last = e->file;
    }
    char list[512];
    budget_list(&rep->budgets, list, sizeof list);
    if (rep->crossed == 0 && rep->unreadable == 0)
        fprintf(out, "cuprof check: %zu file%s within every budget (%s)\n", rep->count,
                rep->count == 1 ? "" : "s", list);
    else {
        fprintf(out, "cuprof check: %zu budget%s crossed in %zu of %zu file%s", rep->crossed,
                rep->crossed == 1 ? "" : "s", files_crossed, rep->count,
                rep->count == 1 ? "" : "s");
        if (rep->unreadable > 0)
            fprintf(out, "; %zu could not be read", rep->unreadable);
        fprintf(out, " (%s)\n", list);
    }
    return !ferror(out);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static const char *const check_names[] = {
    [CHECK_PEAK_RESERVED] = "peak_reserved",
    [CHECK_PEAK_ALLOCATED] = "peak_allocated",
    [CHECK_GROWTH_ALLOCATED] = "growth_allocated",
    [CHECK_GROWTH_RESERVED] = "growth_reserved",
    [CHECK_GROWTH_SITE] = "growth_site",
    [CHECK_LEAKS] = "leaks",
    [CHECK_OOM] = "oom",
};

static void
emit_entry(struct emitter *j, const struct check_report *rep, const struct check_entry *e)
{
    char budget[128];
    emitter_begin_dict(j);
    cli_json_key_string(j, "file", rep->paths[e->file]);
    cli_json_key_u64(j, "device", e->r.device);
    cli_json_key_string(j, "budget",
                        check_budget_name(&rep->budgets, e->r.kind, budget, sizeof budget));
    cli_json_key_string(j, "check", check_names[e->r.kind]);
    emitter_key(j, "crossed");
    emitter_bool(j, e->r.crossed);
    cli_json_key_u64(j, "value", e->r.value);
    cli_json_key_u64(j, "limit", e->r.limit);
    cli_json_key_u64(j, "base", e->r.base);
    cli_json_key_int(j, "growth", e->r.growth);
    cli_json_key_u64(j, "count", e->r.count);
    cli_json_key_string(j, "message", e->message);
    emitter_key(j, "site");
    if (e->site != NULL)
        cli_json_string(j, e->site);
    else
        emitter_none(j);
    emitter_end(j);
}

bool
check_report_json(const struct check_report *rep, FILE *out)
{
    struct emitter *j = cli_json_open(out);
    if (j == NULL)
        return false;
    char list[512];
    emitter_begin_dict(j);
    emitter_key(j, "baseline");
    if (rep->baseline != NULL)
        cli_json_string(j, rep->baseline);
    else
        emitter_none(j);
    emitter_key(j, "files");
    emitter_begin_list(j);
    for (size_t i = 0; i < rep->count; i++)
        cli_json_string(j, rep->paths[i]);
    emitter_end(j);
    budget_list(&rep->budgets, list, sizeof list);
    cli_json_key_string(j, "budgets", list);
    cli_json_key_u64(j, "crossed", rep->crossed);
    emitter_key(j, "unreadable");
    emitter_begin_list(j);
    for (size_t i = 0; i < rep->n; i++)
        if (rep->v[i].unreadable)
            cli_json_string(j, rep->paths[rep->v[i].file]);
    emitter_end(j);
    emitter_key(j, "results");
    emitter_begin_list(j);
    for (size_t i = 0; i < rep->n; i++)
        if (!rep->v[i].unreadable)
            emit_entry(j, rep, &rep->v[i]);
    emitter_end(j);
    emitter_end(j);
    return cli_json_close(j);
}

/* ---- JUnit XML ------------------------------------------------------------------------------- */

/* Text already free of control characters (cli_term) with XML's five characters escaped. */
static void
xml_text(FILE *out, const char *s)
{
    char safe[LINE_MAX_TEXT];
    for (const char *p = cli_term(s, safe, sizeof safe); *p != '\0'; p++) {
        switch (*p) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&apos;", out);
            break;
        default:
            fputc(*p, out);
        }
    }
}

static const char *const case_suffix[] = {
    [CHECK_PEAK_RESERVED] = "",
    [CHECK_PEAK_ALLOCATED] = "",
    [CHECK_GROWTH_ALLOCATED] = " (peak allocated)",
    [CHECK_GROWTH_RESERVED] = " (peak reserved)",
    [CHECK_GROWTH_SITE] = " (call sites at the peak)",
    [CHECK_LEAKS] = "",
    [CHECK_OOM] = "",
};

static void
junit_case(FILE *out, const struct check_report *rep, const struct check_entry *e)
{
    char name[256], budget[128], line[LINE_MAX_TEXT + 1100], safe[1024];
    fputs("    <testcase classname=\"", out);
    xml_text(out, rep->paths[e->file]);
    if (e->unreadable) {
        fputs("\" name=\"read\">\n      <error type=\"unreadable\" message=\"", out);
        xml_text(out, rep->paths[e->file]);
        fputs(" could not be read (see the command's standard error)\"/>\n"
              "    </testcase>\n",
              out);
        return;
    }
    snprintf(name, sizeof name, "device %zu: %s%s", e->r.device,
             check_budget_name(&rep->budgets, e->r.kind, budget, sizeof budget),
             case_suffix[e->r.kind]);
    snprintf(line, sizeof line, "%s: device %zu: %s",
             cli_term(rep->paths[e->file], safe, sizeof safe), e->r.device, e->message);
    fputs("\" name=\"", out);
    xml_text(out, name);
    fputs("\">\n", out);
    if (e->r.crossed) {
        fputs("      <failure type=\"budget\" message=\"", out);
        xml_text(out, line);
        fputs("\">", out);
        xml_text(out, line);
        fputs("</failure>\n", out);
    } else {
        fputs("      <system-out>", out);
        xml_text(out, line);
        fputs("</system-out>\n", out);
    }
    fputs("    </testcase>\n", out);
}

int
check_report_junit(const struct check_report *rep, const char *path)
{
    struct out_file o;
    if (out_file_open(&o, path) != 0)
        return -1;
    size_t tests = rep->n;
    fprintf(o.f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<testsuites name=\"cuprof check\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\">\n"
            "  <testsuite name=\"cuprof check\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" "
            "skipped=\"0\">\n",
            tests, rep->crossed, rep->unreadable, tests, rep->crossed, rep->unreadable);
    for (size_t i = 0; i < rep->n; i++)
        junit_case(o.f, rep, &rep->v[i]);
    fputs("  </testsuite>\n</testsuites>\n", o.f);
    return out_file_end(&o, true) == 0 ? 0 : -1;
}
