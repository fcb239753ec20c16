/* frame_entry.c: library runs of a kept stack replaced by their entry point. */
#include "cli/frame_entry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "snapshot/python_paths.h"

enum {
    FACT_BARE = 1,    /* an address without a symbol: "libfoo.so+0x1a2b" */
    FACT_LIBRARY = 2, /* a file in the interpreter's library directories */
    FACT_PYTHON = 4,  /* a Python frame (its file ends in .py) */
};

static const char *
base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

bool
frame_entry_is_bare(const struct snap_frame *frame)
{
    if (frame->name == NULL || frame->filename == NULL || frame->filename[0] == '\0')
        return false;
    const char *base = base_name(frame->filename);
    size_t len = strlen(base);
    if (len == 0 || strncmp(frame->name, base, len) != 0 || strncmp(frame->name + len, "+0x", 3))
        return false;
    const char *hex = frame->name + len + 3;
    return hex[0] != '\0' && strspn(hex, "0123456789abcdefABCDEF") == strlen(hex);
}

bool
frame_entry_is_library(const struct snap_frame *frame)
{
    struct python_path p;
    python_path_classify(frame->filename, &p);
    return python_path_is_library(&p);
}

static bool
is_python(const struct snap_frame *frame)
{
    size_t len = frame->filename != NULL ? strlen(frame->filename) : 0;
    return len >= 3 && strcmp(frame->filename + len - 3, ".py") == 0;
}

int
frame_entry_facts_make(const struct snapshot *snap, struct frame_entry_facts *out)
{
    out->count = snap->frame_count;
    out->flags = calloc(snap->frame_count + 1, 1);
    if (out->flags == NULL)
        return -1;
    for (size_t i = 0; i < snap->frame_count; i++) {
        const struct snap_frame *f = &snap->frames[i];
        out->flags[i] = (uint8_t)((frame_entry_is_bare(f) ? FACT_BARE : 0) |
                                  (frame_entry_is_library(f) ? FACT_LIBRARY : 0) |
                                  (is_python(f) ? FACT_PYTHON : 0));
    }
    return 0;
}

void
frame_entry_facts_free(struct frame_entry_facts *facts)
{
    free(facts->flags);
    facts->flags = NULL;
    facts->count = 0;
}

static uint8_t
fact(const struct frame_entry_facts *facts, uint32_t frame)
{
    return frame < facts->count ? facts->flags[frame] : 0;
}

/* The frame that stands for a library run: "via numba.cuda.api.to_device" for the run's
 * outermost frame, the one the user's code called. */
static int
via_frame(struct snapshot *snap, const struct frame_entry_facts *facts, uint32_t entry,
          uint32_t *out)
{
    const struct snap_frame *f = &snap->frames[entry];
    struct python_path p;
    python_path_classify(f->filename, &p);
    char module[512], name[1024];
    python_path_module(f->filename, &p, module, sizeof module);
    const char *fn = f->name != NULL ? f->name : "";
    if ((fact(facts, entry) & FACT_BARE) || fn[0] == '\0' || strcmp(fn, "<module>") == 0)
        snprintf(name, sizeof name, "%s%s", CLI_VIA_PREFIX, module);
    else if (fact(facts, entry) & FACT_PYTHON)
        snprintf(name, sizeof name, "%s%s.%s", CLI_VIA_PREFIX, module, fn);
    else /* a native module's function: its own name, the module beside it */
        snprintf(name, sizeof name, "%s%s (%s)", CLI_VIA_PREFIX, fn, module);
    return snapshot_add_frame(snap, name, "", SNAP_LINE_UNKNOWN, out) == 0 ? 0 : -1;
}

/* Library runs give way: one followed by the user's code becomes its via frame, one at the
 * outer end (the interpreter's start-up, a thread's bootstrap) goes. */
static int
give_way(struct snapshot *snap, const struct frame_entry_facts *facts, uint32_t *frames, size_t *n)
{
    bool user = false;
    for (size_t i = 0; i < *n; i++)
        user = user || !(fact(facts, frames[i]) & FACT_LIBRARY);
    if (!user)
        return 0; /* nothing but library code: the stack stays as it is */
    size_t out = 0;
    for (size_t i = 0; i < *n;) {
        if (!(fact(facts, frames[i]) & FACT_LIBRARY)) {
            frames[out++] = frames[i++];
            continue;
        }
        size_t end = i;
        while (end < *n && (fact(facts, frames[end]) & FACT_LIBRARY))
            end++;
        if (end < *n && via_frame(snap, facts, frames[end - 1], &frames[out++]) != 0)
            return -1;
        i = end;
    }
    *n = out;
    return 0;
}

static bool
same_file(const struct snapshot *snap, uint32_t a, uint32_t b)
{
    const char *fa = snap->frames[a].filename, *fb = snap->frames[b].filename;
    return fa != NULL && fb != NULL && strcmp(fa, fb) == 0;
}

/* Stripped runs collapse: into the library's named entry point right after them, shown with the
 * library's file name, else into the run's outermost offset. */
static int
collapse(struct snapshot *snap, const struct frame_entry_facts *facts, uint32_t *frames, size_t *n)
{
    size_t out = 0;
    for (size_t i = 0; i < *n;) {
        if (!(fact(facts, frames[i]) & FACT_BARE)) {
            frames[out++] = frames[i++];
            continue;
        }
        size_t end = i + 1;
        while (end < *n && (fact(facts, frames[end]) & FACT_BARE) &&
               same_file(snap, frames[i], frames[end]))
            end++;
        if (end < *n && same_file(snap, frames[i], frames[end]) &&
            snap->frames[frames[end]].line == SNAP_LINE_UNKNOWN) {
            /* Copied out: adding a frame may move snap->frames. */
            char name[1024], file[512];
            snprintf(name, sizeof name, "%s", snap->frames[frames[end]].name);
            snprintf(file, sizeof file, "%s", base_name(snap->frames[frames[end]].filename));
            if (snapshot_add_frame(snap, name, file, SNAP_LINE_UNKNOWN, &frames[out++]) != 0)
                return -1;
            i = end + 1;
        } else {
            frames[out++] = frames[end - 1];
            i = end;
        }
    }
    *n = out;
    return 0;
}

int
frame_entry_rewrite(struct snapshot *snap, const struct frame_entry_facts *facts, bool python,
                    uint32_t *frames, size_t *n)
{
    if (python && give_way(snap, facts, frames, n) != 0)
        return -1;
    return collapse(snap, facts, frames, n);
}
