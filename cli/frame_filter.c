/* frame_filter.c: the machinery rules (one table) and the rewrite of a snapshot's stacks. */
#include "cli/frame_filter.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_util.h"
#include "cli/frame_entry.h"

/* What part of a frame a rule looks at, and how. */
enum frame_match {
    NAME_IS,      /* the function name is `text` */
    NAME_STARTS,  /* the function name starts with `text` */
    NAME_HAS,     /* the function name contains `text` */
    NAME_API,     /* `text` then an upper-case letter: cudaMalloc, cuMemAlloc_v2 */
    FILE_HAS,     /* the filename contains `text` */
    FILE_DIR,     /* the filename has the folders `text` (at its start or after a '/') */
    BASE_STARTS,  /* the filename's last component starts with `text` (a module path) */
    BASE_PROGRAM, /* the last component is `text` plus a version: python3, python3.12t */
};

/* When a rule hides a frame. */
enum frame_hide {
    HIDE_ALWAYS,      /* allocation machinery: never the user's code */
    HIDE_WITH_PYTHON, /* the interpreter's C frames: hidden where Python frames stand for them */
};

struct frame_rule {
    enum frame_hide hide;
    enum frame_match match;
    const char *text;
};

/* Every rule, in one place. PyTorch's own list (memory_viz's _frame_filter) is here with exact
 * names where its substrings would also hide user code ("_start" in "train_start"). */
static const struct frame_rule frame_rules[] = {
    /* cuprof itself, and the CUDA runtime and driver (real, static, and the simulated one). */
    {HIDE_ALWAYS, BASE_STARTS, "libcuprof"},
    {HIDE_ALWAYS, BASE_STARTS, "libcuda"}, /* libcuda.so.1, libcudart.so.13, libcudart_static */
    {HIDE_ALWAYS, FILE_DIR, "tests/sim/"},
    {HIDE_ALWAYS, NAME_STARTS, "cudart::"},
    {HIDE_ALWAYS, NAME_STARTS, "__cudart"},
    {HIDE_ALWAYS, NAME_STARTS, "libcudart_static_"}, /* nvcc's static runtime: hashed names */
    {HIDE_ALWAYS, NAME_API, "cuda"},
    {HIDE_ALWAYS, NAME_API, "cu"},
    /* NVTX: the toolkit's header-only wrappers inside the program, NVIDIA's interop library. */
    {HIDE_ALWAYS, FILE_DIR, "nvtx3/"},
    {HIDE_ALWAYS, BASE_STARTS, "libnvtx3interop"},
    /* PyTorch's unwinder, caching allocator, tensor factories and dispatcher glue. */
    {HIDE_ALWAYS, NAME_HAS, "unwind::unwind"},
    {HIDE_ALWAYS, NAME_STARTS, "torch::unwind::"},
    {HIDE_ALWAYS, NAME_HAS, "CapturedTraceback::gather"},
    {HIDE_ALWAYS, NAME_HAS, "gather_with_cpp"},
    {HIDE_ALWAYS, NAME_HAS, "CUDACachingAllocator::"},
    {HIDE_ALWAYS, NAME_HAS, "DeviceCachingAllocator::"},
    {HIDE_ALWAYS, NAME_STARTS, "at::empty"},
    {HIDE_ALWAYS, NAME_STARTS, "at::detail::empty_"},
    {HIDE_ALWAYS, NAME_STARTS, "at::native::empty_"},
    {HIDE_ALWAYS, NAME_STARTS, "at::cuda::empty"},
    {HIDE_ALWAYS, NAME_STARTS, "at::_ops::empty"},
    {HIDE_ALWAYS, NAME_HAS, "wrapper_CUDA_memory_format_empty"},
    {HIDE_ALWAYS, NAME_HAS, "wrapper_CUDA__empty"},
    {HIDE_ALWAYS, NAME_STARTS, "c10::Dispatcher::"},
    {HIDE_ALWAYS, NAME_STARTS, "c10::impl::"},
    {HIDE_ALWAYS, NAME_STARTS, "c10::KernelFunction::"},
    {HIDE_ALWAYS, NAME_STARTS, "c10::BoxedKernel::"},
    {HIDE_ALWAYS, NAME_STARTS, "c10::callUnboxedKernelFunction"},
    {HIDE_ALWAYS, NAME_STARTS, "torch::autograd::THPVariable_"},
    {HIDE_ALWAYS, FILE_HAS, "core/boxing"},
    {HIDE_ALWAYS, FILE_HAS, "/Register"},
    {HIDE_ALWAYS, FILE_HAS, "/Redispatch"},
    /* libc's process and thread start-up. */
    {HIDE_ALWAYS, NAME_IS, "_start"},
    {HIDE_ALWAYS, NAME_STARTS, "__libc_start_"},
    {HIDE_ALWAYS, NAME_IS, "start_thread"},
    {HIDE_ALWAYS, NAME_STARTS, "__clone"},
    {HIDE_ALWAYS, NAME_IS, "clone3"},
    /* The Python interpreter: its program, library and sources, ctypes and libffi. */
    {HIDE_WITH_PYTHON, BASE_PROGRAM, "python"},
    {HIDE_WITH_PYTHON, BASE_STARTS, "libpython"},
    {HIDE_WITH_PYTHON, BASE_STARTS, "libffi"},
    {HIDE_WITH_PYTHON, BASE_STARTS, "_ctypes"},
    {HIDE_WITH_PYTHON, FILE_DIR, "Python/"},
    {HIDE_WITH_PYTHON, FILE_DIR, "Objects/"},
    {HIDE_WITH_PYTHON, FILE_DIR, "Modules/"},
    {HIDE_WITH_PYTHON, FILE_DIR, "Include/"},
    {HIDE_WITH_PYTHON, FILE_DIR, "Parser/"},
    {HIDE_WITH_PYTHON, FILE_DIR, "Programs/"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "_PyEval_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "PyEval_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "_PyObject_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "PyObject_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "_PyFunction_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "PyFunction_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "_PyVectorcall_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "PyVectorcall_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "_PyCFunction"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "PyCFunction_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "method_vectorcall"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "cfunction_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "slot_tp_call"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "_PyRun_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "PyRun_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "run_mod"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "run_eval_code_obj"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "pymain_"},
    {HIDE_WITH_PYTHON, NAME_IS, "Py_RunMain"},
    {HIDE_WITH_PYTHON, NAME_IS, "Py_BytesMain"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "ffi_call"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "_ctypes_"},
    {HIDE_WITH_PYTHON, NAME_STARTS, "PyCFuncPtr_call"},
};

static bool
starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static const char *
last_component(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

/* `dirs` at the start of the path or right after a '/'. */
static bool
has_folders(const char *path, const char *dirs)
{
    if (starts_with(path, dirs))
        return true;
    for (const char *p = strchr(path, '/'); p != NULL; p = strchr(p + 1, '/'))
        if (starts_with(p + 1, dirs))
            return true;
    return false;
}

/* "python", "python3", "python3.12", "python3.13t", "python3.12d": the interpreter's program. */
static bool
is_program(const char *base, const char *program)
{
    if (!starts_with(base, program))
        return false;
    for (const char *p = base + strlen(program); *p != '\0'; p++)
        if (strchr("0123456789.dmtu", *p) == NULL)
            return false;
    return true;
}

static bool
rule_matches(const struct frame_rule *r, const char *name, const char *file)
{
    switch (r->match) {
    case NAME_IS:
        return strcmp(name, r->text) == 0;
    case NAME_STARTS:
        return starts_with(name, r->text);
    case NAME_HAS:
        return strstr(name, r->text) != NULL;
    case NAME_API:
        return starts_with(name, r->text) && name[strlen(r->text)] >= 'A' &&
               name[strlen(r->text)] <= 'Z';
    case FILE_HAS:
        return strstr(file, r->text) != NULL;
    case FILE_DIR:
        return has_folders(file, r->text);
    case BASE_STARTS:
        return starts_with(last_component(file), r->text);
    case BASE_PROGRAM:
        return is_program(last_component(file), r->text);
    }
    return false;
}

bool
frame_filter_is_python(const struct snap_frame *frame)
{
    const char *file = frame->filename != NULL ? frame->filename : "";
    size_t len = strlen(file);
    return len >= 3 && strcmp(file + len - 3, ".py") == 0;
}

bool
frame_filter_hides(const struct snap_frame *frame, bool stack_has_python)
{
    const char *name = frame->name != NULL ? frame->name : "";
    const char *file = frame->filename != NULL ? frame->filename : "";
    /* A Python frame is the user's code, whatever its function is called. */
    if (frame_filter_is_python(frame))
        return false;
    for (size_t i = 0; i < sizeof(frame_rules) / sizeof(frame_rules[0]); i++) {
        const struct frame_rule *r = &frame_rules[i];
        if ((r->hide == HIDE_ALWAYS || stack_has_python) && rule_matches(r, name, file))
            return true;
    }
    return false;
}

/* Per frame, decided once: bit 0 hidden always, bit 1 hidden with Python, bit 2 a Python frame. */
enum {
    KIND_HIDDEN = 1,
    KIND_HIDDEN_WITH_PYTHON = 2,
    KIND_PYTHON = 4,
};

static uint8_t *
classify_frames(const struct snapshot *snap)
{
    uint8_t *kind = calloc(snap->frame_count + 1, 1);
    if (kind == NULL)
        return NULL;
    for (size_t i = 0; i < snap->frame_count; i++) {
        const struct snap_frame *f = &snap->frames[i];
        if (frame_filter_is_python(f))
            kind[i] = KIND_PYTHON;
        else if (frame_filter_hides(f, false))
            kind[i] = KIND_HIDDEN;
        else if (frame_filter_hides(f, true))
            kind[i] = KIND_HIDDEN_WITH_PYTHON;
    }
    return kind;
}

/* What filtered_stack needs: each frame's kind and entry facts, for the frames the model had
 * before filtering began (frames it adds are never classified). */
struct filter_state {
    const uint8_t *kind;
    size_t known;
    const struct frame_entry_facts *facts;
    uint32_t *kept;
};

/* The stack of stack `s`'s kept frames, cut down to the user's entries into libraries (s itself
 * when nothing changes or everything would be hidden). */
static int
filtered_stack(struct snapshot *snap, const struct filter_state *fs, uint32_t s, uint32_t *out)
{
    struct snap_stack st = snap->stacks[s];
    const uint32_t *frames = snap->stack_frames + st.first;
    bool python = false;
    for (uint32_t k = 0; k < st.count; k++)
        if (frames[k] < fs->known && (fs->kind[frames[k]] & KIND_PYTHON))
            python = true;
    uint8_t hidden = KIND_HIDDEN | (python ? KIND_HIDDEN_WITH_PYTHON : 0);
    size_t n = 0;
    for (uint32_t k = 0; k < st.count; k++)
        if (frames[k] >= fs->known || !(fs->kind[frames[k]] & hidden))
            fs->kept[n++] = frames[k];
    *out = s;
    if (n == 0)
        return 0;
    /* Copied out first: adding a frame or a stack may move stack_frames. */
    if (frame_entry_rewrite(snap, fs->facts, python, fs->kept, &n) != 0)
        return -1;
    st = snap->stacks[s];
    if (n == st.count && memcmp(fs->kept, snap->stack_frames + st.first, n * sizeof(uint32_t)) == 0)
        return 0;
    return snapshot_add_stack(snap, fs->kept, n, out) == 0 ? 0 : -1;
}

static uint32_t
mapped(const uint32_t *map, size_t count, uint32_t stack)
{
    return stack < count ? map[stack] : stack;
}

int
frame_filter_map(struct snapshot *snap, uint32_t **map_out, size_t *count_out)
{
    size_t count = snap->stack_count, longest = 0;
    for (size_t s = 0; s < count; s++)
        if (snap->stacks[s].count > longest)
            longest = snap->stacks[s].count;
    struct frame_entry_facts facts = {NULL, 0};
    uint8_t *kind = classify_frames(snap);
    uint32_t *map = malloc((count + 1) * sizeof(*map));
    uint32_t *kept = malloc((longest + 1) * sizeof(*kept));
    int rc = kind != NULL && map != NULL && kept != NULL ? 0 : -1;
    if (rc == 0)
        rc = frame_entry_facts_make(snap, &facts);
    struct filter_state fs = {kind, snap->frame_count, &facts, kept};
    for (size_t s = 0; rc == 0 && s < count; s++)
        rc = filtered_stack(snap, &fs, (uint32_t)s, &map[s]);
    frame_entry_facts_free(&facts);
    free(kind);
    free(kept);
    if (rc != 0) {
        free(map);
        map = NULL;
    }
    *map_out = map;
    *count_out = count;
    return rc;
}

int
frame_filter_apply(struct snapshot *snap)
{
    uint32_t *map;
    size_t count;
    if (frame_filter_map(snap, &map, &count) != 0)
        return -1;
    /* References change only once every stack has its filtered twin. */
    for (size_t i = 0; i < snap->segment_count; i++)
        snap->segments[i].stack = mapped(map, count, snap->segments[i].stack);
    for (size_t i = 0; i < snap->block_count; i++)
        snap->blocks[i].stack = mapped(map, count, snap->blocks[i].stack);
    for (size_t d = 0; d < snap->device_count; d++) {
        struct snap_device_trace *t = &snap->device_traces[d];
        for (size_t i = 0; i < t->count; i++)
            t->entries[i].stack = mapped(map, count, t->entries[i].stack);
    }
    free(map);
    return 0;
}

int
frame_filter_load(const char *path, bool all_frames, struct snapshot **out)
{
    int rc = cli_load(path, out);
    if (rc != CLI_OK || all_frames)
        return rc;
    if (frame_filter_apply(*out) != 0) {
        char safe[1024];
        fprintf(stderr, "cuprof: %s: out of memory\n", cli_term(path, safe, sizeof safe));
        snapshot_free(*out);
        *out = NULL;
        return CLI_BADUSE;
    }
    return CLI_OK;
}
