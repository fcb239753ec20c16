/* symbolize.c: libdw (dwfl over /proc/self/maps) lookups of return addresses, with inlined
 * frames from the DWARF scope chain, C++ names demangled with libstdc++'s __cxa_demangle
 * (already loaded, or dlopen'ed at dump time), an ip -> frames cache and interned strings.
 * libdw itself is dlopen'ed (dw_api.c); without it, dladdr or the module's ELF symbol table
 * (elf_symbols.c) gives the function's name, the module's path and line 0. */
#include "snapshot/symbolize.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/dw_api.h"
#include "snapshot/elf_symbols.h"
#include "snapshot/python_frames.h"
#include "snapshot/symbolize_cu.h"
#include "snapshot/unloaded_modules.h"

/* Frames one ip can expand to (inlining depth); deeper chains keep the innermost ones. */
#define SYM_MAX_INLINE 32
/* Modules whose ELF symbol tables are kept open without libdw; later ones get module+offset. */
#define SYM_MAX_MODULES 1024

typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

struct sym_cache_slot {
    uintptr_t ip;   /* 0 = empty slot */
    uint32_t first; /* index into frames */
    uint32_t count;
};

/* A module's ELF symbol table, opened on its first frame when libdw is missing. */
struct sym_module {
    const char *path;            /* interned: compared by pointer */
    struct elf_symbols *symbols; /* NULL: no readable symbol table */
};

struct symbolizer {
    const struct dw_api *dw; /* NULL: libdw not loadable */
    Dwfl_Callbacks callbacks;
    Dwfl *dwfl; /* NULL: dladdr fallback */
    struct cu_index_set *cus;
    bool refreshed; /* /proc/self/maps re-read once after a miss (a library loaded since) */
    /* The loader's counts of objects mapped and unmapped when the modules were read. */
    unsigned long long loader_adds, loader_subs;
    struct symbolized_frame *frames;
    size_t frame_count, frame_cap;
    struct sym_cache_slot *cache; /* open addressing on ip, at most half full */
    size_t cache_mask, cache_used;
    char **strings; /* open addressing set of interned strings */
    size_t string_mask, string_used;
    size_t resolved;
    demangle_fn demangle;
    void *libstdcxx;
    bool demangle_tried;
    struct sym_module *modules;
    size_t module_count, module_cap;
};

static char *g_debuginfo_path;

static uint64_t
hash_bytes(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

static uint64_t
hash_ip(uintptr_t ip)
{
    uint64_t h = (uint64_t)ip * 0x9e3779b97f4a7c15u;
    return h ^ (h >> 29);
}

/* Returns the one stored copy of s, or NULL when out of memory. */
static const char *
sym_intern(struct symbolizer *sym, const char *s)
{
    if ((sym->string_used + 1) * 2 > sym->string_mask + 1) {
        size_t slots = (sym->string_mask + 1) * 2;
        char **grown = calloc(slots, sizeof(*grown));
        if (grown == NULL)
            return NULL;
        for (size_t i = 0; i <= sym->string_mask; i++) {
            if (sym->strings[i] == NULL)
                continue;
            size_t j = hash_bytes(sym->strings[i]) & (slots - 1);
            while (grown[j] != NULL)
                j = (j + 1) & (slots - 1);
            grown[j] = sym->strings[i];
        }
        free(sym->strings);
        sym->strings = grown;
        sym->string_mask = slots - 1;
    }
    size_t i = hash_bytes(s) & sym->string_mask;
    for (; sym->strings[i] != NULL; i = (i + 1) & sym->string_mask) {
        if (strcmp(sym->strings[i], s) == 0)
            return sym->strings[i];
    }
    sym->strings[i] = strdup(s);
    if (sym->strings[i] == NULL)
        return NULL;
    sym->string_used++;
    return sym->strings[i];
}

/* libdwfl's file lookups, kept to this machine and out of the program's children: the standard
 * debuginfo lookup would, where nothing is found locally, load libdebuginfod (libcurl and some
 * twenty libraries, run inside the profiled program) and, with DEBUGINFOD_URLS set as many
 * distributions set it, download debug files in the middle of a dump; and the files libdwfl
 * opens stay open for the symbolizer's life without FD_CLOEXEC, so every program that runs
 * another would hand them on. */
static int
sym_keep_private(int fd)
{
    if (fd >= 0)
        (void)fcntl(fd, F_SETFD, FD_CLOEXEC); /* ours: just opened on this thread */
    return fd;
}

static int
sym_find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base, char **file_name,
             Elf **elfp)
{
    const struct dw_api *dw = dw_api_get();
    return sym_keep_private(
        dw->dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp));
}

/* The candidate's GNU build ID is the module's (a debug link names a file, not a version). */
static bool
sym_same_build_id(const struct dw_api *dw, int fd, const unsigned char *bits, int len)
{
    Elf *elf = dw->elf_begin(fd, ELF_C_READ_MMAP, NULL);
    const void *theirs = NULL;
    ssize_t n = elf != NULL ? dw->dwelf_elf_gnu_build_id(elf, &theirs) : -1;
    bool same = n == len && memcmp(theirs, bits, (size_t)len) == 0;
    if (elf != NULL)
        dw->elf_end(elf);
    return same;
}

/* A .gnu_debuglink's file where GDB and libdwfl look: beside the module, in .debug/ there, and
 * under /usr/lib/debug; only with the module's build ID (no CRC of whole files at dump time). */
static int
sym_find_by_debuglink(const struct dw_api *dw, Dwfl_Module *mod, const char *file_name,
                      const char *link, char **found)
{
    const unsigned char *bits = NULL;
    GElf_Addr vaddr = 0;
    int len = dw->dwfl_module_build_id(mod, &bits, &vaddr);
    const char *slash = strrchr(file_name, '/');
    if (len <= 0 || slash == NULL || strchr(link, '/') != NULL)
        return -1;
    int dir_len = (int)(slash - file_name);
    static const char *const formats[] = {"%.*s/%s", "%.*s/.debug/%s", "/usr/lib/debug%.*s/%s"};
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
        char path[PATH_MAX];
        int n = snprintf(path, sizeof(path), formats[i], dir_len, file_name, link);
        if (n <= 0 || (size_t)n >= sizeof(path) || strcmp(path, file_name) == 0)
            continue;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (sym_same_build_id(dw, fd, bits, len) && (*found = strdup(path)) != NULL)
            return fd;
        close(fd);
    }
    return -1;
}

static int
sym_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
                   const char *file_name, const char *debuglink, GElf_Word crc, char **found)
{
    const struct dw_api *dw = dw_api_get();
    /* By build ID under /usr/lib/debug/.build-id: the separate debug file, or a dwz file. */
    int fd = sym_keep_private(dw->dwfl_build_id_find_debuginfo(mod, userdata, name, base, file_name,
                                                               debuglink, crc, found));
    if (fd < 0 && debuglink != NULL && file_name != NULL)
        fd = sym_find_by_debuglink(dw, mod, file_name, debuglink, found);
    return fd;
}

/* Reports this process's modules to a new dwfl. A dwfl that cannot be set up (no /proc?) leaves
 * sym->dwfl NULL: the dladdr fallback. Returns -1 only when out of memory. */
static int
sym_dwfl_setup(struct symbolizer *sym)
{
    const struct dw_api *dw = sym->dw;
    sym->cus = cu_index_set_create(dw);
    if (sym->cus == NULL)
        return -1;
    sym->callbacks = (Dwfl_Callbacks){
        .find_elf = sym_find_elf,
        .find_debuginfo = sym_find_debuginfo,
        .debuginfo_path = &g_debuginfo_path,
    };
    sym->dwfl = dw->dwfl_begin(&sym->callbacks);
    if (sym->dwfl == NULL)
        return 0;
    dw->dwfl_report_begin(sym->dwfl);
    int rc = dw->dwfl_linux_proc_report(sym->dwfl, getpid());
    if (dw->dwfl_report_end(sym->dwfl, NULL, NULL) != 0 || rc != 0) {
        dw->dwfl_end(sym->dwfl);
        sym->dwfl = NULL;
    }
    return 0;
}

struct symbolizer *
symbolizer_create(void)
{
    struct symbolizer *sym = calloc(1, sizeof(*sym));
    if (sym == NULL)
        return NULL;
    sym->cache_mask = 1023;
    sym->string_mask = 1023;
    sym->cache = calloc(sym->cache_mask + 1, sizeof(*sym->cache));
    sym->strings = calloc(sym->string_mask + 1, sizeof(*sym->strings));
    if (sym->cache == NULL || sym->strings == NULL) {
        symbolizer_destroy(sym);
        return NULL;
    }
    unloaded_modules_loader_counts(&sym->loader_adds, &sym->loader_subs);
    sym->dw = dw_api_get();
    if (sym->dw != NULL && sym_dwfl_setup(sym) != 0) {
        symbolizer_destroy(sym);
        return NULL;
    }
    return sym;
}

void
symbolizer_destroy(struct symbolizer *sym)
{
    if (sym == NULL)
        return;
    if (sym->dwfl != NULL)
        sym->dw->dwfl_end(sym->dwfl);
    cu_index_set_destroy(sym->cus);
    if (sym->strings != NULL) {
        for (size_t i = 0; i <= sym->string_mask; i++)
            free(sym->strings[i]);
    }
    free(sym->strings);
    free(sym->cache);
    free(sym->frames);
    for (size_t i = 0; i < sym->module_count; i++)
        elf_symbols_close(sym->modules[i].symbols);
    free(sym->modules);
    if (sym->libstdcxx != NULL)
        dlclose(sym->libstdcxx);
    free(sym);
}

size_t
symbolizer_resolved_count(const struct symbolizer *sym)
{
    return sym->resolved;
}

bool
symbolizer_reads_lines(const struct symbolizer *sym)
{
    return sym->dwfl != NULL;
}

static demangle_fn
sym_demangler(struct symbolizer *sym)
{
    if (sym->demangle_tried)
        return sym->demangle;
    sym->demangle_tried = true;
    void *fn = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (fn == NULL) {
        /* A C program has no libstdc++ loaded; dump time may load it (never the hot path). */
        sym->libstdcxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (sym->libstdcxx != NULL)
            fn = dlsym(sym->libstdcxx, "__cxa_demangle");
    }
    /* memcpy: ISO C has no object-to-function pointer cast. */
    if (fn != NULL)
        memcpy(&sym->demangle, &fn, sizeof(sym->demangle));
    return sym->demangle;
}

/* Interned demangled name for a symbol or DWARF linkage name (itself when not mangled). */
static const char *
sym_name(struct symbolizer *sym, const char *raw)
{
    if (raw[0] == '_' && raw[1] == 'Z') {
        demangle_fn demangle = sym_demangler(sym);
        int status = -1;
        char *plain = demangle != NULL ? demangle(raw, NULL, NULL, &status) : NULL;
        if (plain != NULL && status == 0) {
            const char *s = sym_intern(sym, plain);
            free(plain);
            return s;
        }
        free(plain);
    }
    return sym_intern(sym, raw);
}

/* The raw name of a function DIE: its linkage name (mangled, C++) or plain name, following
 * DW_AT_abstract_origin / DW_AT_specification for inlined and out-of-line definitions. */
static const char *
die_function_name(const struct dw_api *dw, Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *name =
        dw->dwarf_formstring(dw->dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
    if (name == NULL)
        name = dw->dwarf_formstring(dw->dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
    if (name == NULL)
        name = dw->dwarf_formstring(dw->dwarf_attr_integrate(die, DW_AT_name, &attr));
    return name;
}

static const char *
module_path(const struct dw_api *dw, Dwfl_Module *mod, Dwarf_Addr *start)
{
    const char *name = dw->dwfl_module_info(mod, NULL, start, NULL, NULL, NULL, NULL, NULL);
    return name != NULL ? name : "??";
}

/* "<module basename>+0x<offset>" for an address without a symbol. */
static const char *
sym_offset_name(struct symbolizer *sym, const char *path, uintptr_t offset)
{
    const char *base = strrchr(path, '/');
    char buf[512];
    /* A longer name is cut short: still a readable frame. */
    if (snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, base != NULL ? base + 1 : path,
                 (uint64_t)offset) < 0)
        return sym_intern(sym, "<unknown>");
    return sym_intern(sym, buf);
}

/* The ELF symbol table of the module at `path` (interned), opened on first use; NULL when it
 * has none, cannot be read, or SYM_MAX_MODULES are open already. */
static const struct elf_symbols *
module_symbols(struct symbolizer *sym, const char *path)
{
    for (size_t i = 0; i < sym->module_count; i++)
        if (sym->modules[i].path == path)
            return sym->modules[i].symbols;
    if (sym->module_count == SYM_MAX_MODULES)
        return NULL;
    if (sym->module_count == sym->module_cap) {
        size_t cap = sym->module_cap ? sym->module_cap * 2 : 16;
        struct sym_module *grown = realloc(sym->modules, cap * sizeof(*grown));
        if (grown == NULL)
            return NULL;
        sym->modules = grown;
        sym->module_cap = cap;
    }
    struct sym_module *m = &sym->modules[sym->module_count++];
    *m = (struct sym_module){path, elf_symbols_open(path)};
    return m->symbols;
}

/* An address in no object mapped now: a library's the program unloaded (its ELF symbol table,
 * read from its file, names the function), else "<unknown>". Returns 1, or -1 when out of
 * memory. */
static int
sym_resolve_unloaded(struct symbolizer *sym, uintptr_t addr, struct symbolized_frame *out)
{
    struct unloaded_module gone;
    if (!unloaded_modules_find(addr, &gone)) {
        out[0] = (struct symbolized_frame){sym_intern(sym, "<unknown>"), sym_intern(sym, "??"), 0};
        return out[0].name != NULL && out[0].filename != NULL ? 1 : -1;
    }
    out[0].filename = sym_intern(sym, gone.path);
    if (out[0].filename == NULL)
        return -1;
    const struct elf_symbols *table = module_symbols(sym, out[0].filename);
    const char *raw = table != NULL ? elf_symbols_find(table, (uint64_t)(addr - gone.base)) : NULL;
    out[0].name =
        raw != NULL ? sym_name(sym, raw) : sym_offset_name(sym, gone.path, addr - gone.base);
    out[0].line = 0;
    return out[0].name != NULL ? 1 : -1;
}

/* Without libdw: the exported symbol dladdr finds, else the function symbol of the module's own
 * symbol table (.symtab, else .dynsym), else module+offset; the module's path as filename, line
 * 0. Returns 1, or -1 when out of memory. */
static int
sym_resolve_dladdr(struct symbolizer *sym, uintptr_t addr, struct symbolized_frame *out)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (dladdr1((void *)addr, &info, (void **)&map, RTLD_DL_LINKMAP) == 0 || info.dli_fname == NULL)
        return sym_resolve_unloaded(sym, addr, out);
    /* The main program's link map has an empty name and dli_fname is argv[0]: use its path. */
    const char *path = info.dli_fname;
    char exe[PATH_MAX];
    if (map != NULL && map->l_name != NULL && map->l_name[0] == '\0') {
        ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (len > 0) {
            exe[len] = '\0';
            path = exe;
        }
    }
    out[0].filename = sym_intern(sym, path);
    if (out[0].filename == NULL)
        return -1;
    const char *raw = info.dli_sname;
    if (raw == NULL && map != NULL) {
        const struct elf_symbols *table = module_symbols(sym, out[0].filename);
        if (table != NULL)
            raw = elf_symbols_find(table, (uint64_t)(addr - map->l_addr));
    }
    if (raw != NULL)
        out[0].name = sym_name(sym, raw);
    else
        out[0].name = sym_offset_name(sym, path, addr - (uintptr_t)info.dli_fbase);
    out[0].line = 0;
    return out[0].name != NULL ? 1 : -1;
}

/* The library the program unloaded from where `addr` is, reported to libdwfl from its file (its
 * DWARF gives lines as for any module); NULL when there is none or its file cannot be read. */
static Dwfl_Module *
sym_report_unloaded(struct symbolizer *sym, uintptr_t addr)
{
    struct unloaded_module gone;
    if (!unloaded_modules_find(addr, &gone))
        return NULL;
    const struct dw_api *dw = sym->dw;
    /* Named by its path, as dwfl_linux_proc_report names the modules it finds mapped. */
    dw->dwfl_report_begin_add(sym->dwfl);
    Dwfl_Module *mod = dw->dwfl_report_elf(sym->dwfl, gone.path, gone.path, -1, gone.base, false);
    (void)dw->dwfl_report_end(sym->dwfl, NULL, NULL);
    return mod; /* not dwfl_addrmodule: a module read from the maps may span the range too */
}

static int sym_forget_modules_if_changed(struct symbolizer *sym);

/* libdwfl's module for addr, checked against the loader: libdwfl makes a module from a file's
 * lowest mapping to its highest, anonymous mappings after it included, so an object loaded later
 * where such a mapping was lies inside an older module's span. The loader decides (dladdr's base
 * of the object): when the two disagree the modules are read again if the loader mapped or
 * unmapped anything since they were, and an address they still disagree on is left to dladdr
 * (NULL, *disagree set). */
static Dwfl_Module *
sym_checked_module(struct symbolizer *sym, uintptr_t addr, bool *disagree)
{
    const struct dw_api *dw = sym->dw;
    *disagree = false;
    for (int pass = 0; pass < 2; pass++) {
        Dwfl_Module *mod = dw->dwfl_addrmodule(sym->dwfl, addr);
        Dl_info info;
        if (mod == NULL || dladdr((void *)addr, &info) == 0)
            return mod; /* nothing to compare with: libdwfl's answer stands */
        Dwarf_Addr start = 0;
        (void)dw->dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
        if ((uintptr_t)info.dli_fbase == (uintptr_t)start)
            return mod;
        if (pass == 0 && sym_forget_modules_if_changed(sym) != 0)
            break;
    }
    *disagree = true;
    return NULL;
}

/* The module holding addr: an unloaded library's first (the maps may show a loaded module
 * spanning the hole it left), else libdwfl's as checked against the loader, the maps read again
 * once after a miss (a library loaded since). NULL: none, or *disagree for dladdr to answer. */
static Dwfl_Module *
sym_find_module(struct symbolizer *sym, uintptr_t addr, bool *disagree)
{
    const struct dw_api *dw = sym->dw;
    *disagree = false;
    Dwfl_Module *mod = unloaded_modules_count() != 0 ? sym_report_unloaded(sym, addr) : NULL;
    if (mod == NULL)
        mod = sym_checked_module(sym, addr, disagree);
    if (mod == NULL && !*disagree && !sym->refreshed) {
        sym->refreshed = true;
        dw->dwfl_report_begin_add(sym->dwfl);
        (void)dw->dwfl_linux_proc_report(sym->dwfl, getpid());
        (void)dw->dwfl_report_end(sym->dwfl, NULL, NULL);
        mod = sym_checked_module(sym, addr, disagree);
    }
    return mod;
}

/* Fills up to SYM_MAX_INLINE frames for addr (already ip - 1); returns how many, or -1 on OOM. */
static int
sym_resolve(struct symbolizer *sym, uintptr_t addr, struct symbolized_frame *out)
{
    if (sym->dwfl == NULL)
        return sym_resolve_dladdr(sym, addr, out);
    const struct dw_api *dw = sym->dw;
    bool disagree = false;
    Dwfl_Module *mod = sym_find_module(sym, addr, &disagree);
    if (disagree)
        return sym_resolve_dladdr(sym, addr, out);
    if (mod == NULL)
        return sym_resolve_unloaded(sym, addr, out);
    Dwarf_Addr mod_start = 0;
    const char *path = module_path(dw, mod, &mod_start);

    /* The line of the innermost frame comes from the line table. */
    int lineno = 0;
    const char *src = NULL;
    Dwfl_Line *line = dw->dwfl_module_getsrc(mod, addr);
    if (line != NULL)
        src = dw->dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);

    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dw->dwfl_module_addrdie(mod, addr, &bias);
    Dwarf_Die funcs[SYM_MAX_INLINE];
    int nfuncs =
        cu != NULL ? cu_index_functions(sym->cus, cu, addr - bias, funcs, SYM_MAX_INLINE) : 0;
    if (nfuncs < 0)
        return -1;
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    if (cu != NULL && dw->dwarf_getsrcfiles(cu, &files, &nfiles) != 0)
        files = NULL;
    /* funcs: inlined_subroutine* then their subprogram. Frame k+1's location is where frame k
     * was inlined (its DW_AT_call_file/call_line). */
    const char *file = src;
    int64_t at_line = lineno;
    int n = 0;
    for (; n < nfuncs; n++) {
        const char *raw = die_function_name(dw, &funcs[n]);
        out[n].name = sym_name(sym, raw != NULL ? raw : "<unknown>");
        out[n].filename = sym_intern(sym, file != NULL ? file : path);
        out[n].line = file != NULL ? at_line : 0;
        if (out[n].name == NULL || out[n].filename == NULL)
            return -1;
        Dwarf_Attribute attr;
        Dwarf_Word call_file = 0, call_line = 0;
        file = NULL;
        at_line = 0;
        if (dw->dwarf_formudata(dw->dwarf_attr(&funcs[n], DW_AT_call_file, &attr), &call_file) ==
                0 &&
            files != NULL && call_file < nfiles)
            file = dw->dwarf_filesrc(files, call_file, NULL, NULL);
        if (dw->dwarf_formudata(dw->dwarf_attr(&funcs[n], DW_AT_call_line, &attr), &call_line) == 0)
            at_line = (int64_t)call_line;
    }
    if (n > 0)
        return n;

    /* No DWARF function: the ELF symbol (or module+offset), with the line table if any. */
    const char *symname = dw->dwfl_module_addrname(mod, addr);
    if (symname != NULL) {
        out[0].name = sym_name(sym, symname);
    } else {
        out[0].name = sym_offset_name(sym, path, addr - mod_start);
    }
    out[0].filename = sym_intern(sym, src != NULL ? src : path);
    out[0].line = src != NULL ? lineno : 0;
    return out[0].name != NULL && out[0].filename != NULL ? 1 : -1;
}

static int
sym_cache_grow(struct symbolizer *sym)
{
    size_t slots = (sym->cache_mask + 1) * 2;
    struct sym_cache_slot *grown = calloc(slots, sizeof(*grown));
    if (grown == NULL)
        return -CUPROF_EHOSTMEM;
    for (size_t i = 0; i <= sym->cache_mask; i++) {
        if (sym->cache[i].ip == 0)
            continue;
        size_t j = hash_ip(sym->cache[i].ip) & (slots - 1);
        while (grown[j].ip != 0)
            j = (j + 1) & (slots - 1);
        grown[j] = sym->cache[i];
    }
    free(sym->cache);
    sym->cache = grown;
    sym->cache_mask = slots - 1;
    return 0;
}

/* When the loader mapped or unmapped an object since the modules were read (asked once the
 * program has unloaded a library, or when libdwfl and the loader disagree on an address): an
 * address may hold another library's code now. Every cached answer goes, and libdwfl's modules are
 * read again (those no longer mapped are dropped, with the index of their DWARF). 0, or -1 when out
 * of memory. */
static int
sym_forget_modules_if_changed(struct symbolizer *sym)
{
    unsigned long long adds, subs;
    unloaded_modules_loader_counts(&adds, &subs);
    if (adds == sym->loader_adds && subs == sym->loader_subs)
        return 0;
    sym->loader_adds = adds;
    sym->loader_subs = subs;
    memset(sym->cache, 0, (sym->cache_mask + 1) * sizeof(*sym->cache));
    sym->cache_used = 0;
    sym->frame_count = 0;
    if (sym->dwfl == NULL)
        return 0; /* the ELF symbol tables are by path: the same file is the same table */
    const struct dw_api *dw = sym->dw;
    cu_index_set_destroy(sym->cus);
    sym->cus = cu_index_set_create(dw);
    if (sym->cus == NULL)
        return -1;
    dw->dwfl_report_begin(sym->dwfl);
    (void)dw->dwfl_linux_proc_report(sym->dwfl, getpid());
    (void)dw->dwfl_report_end(sym->dwfl, NULL, NULL);
    sym->refreshed = false;
    return 0;
}

int
symbolizer_lookup(struct symbolizer *sym, uintptr_t ip, struct symbolized_frame *out, size_t cap,
                  size_t *count)
{
    if (python_frames_is_token(ip)) {
        struct symbolized_frame py;
        int line = 0;
        if (!python_frames_get(ip, &py.name, &py.filename, &line)) {
            py.name = sym_intern(sym, "<unknown Python frame>");
            py.filename = sym_intern(sym, "??");
            if (py.name == NULL || py.filename == NULL)
                return -CUPROF_EHOSTMEM;
        }
        py.line = line;
        if (cap > 0)
            out[0] = py;
        *count = 1;
        return 0;
    }
    if (ip == 0) { /* 0 marks an empty cache slot; no code lives there anyway */
        struct symbolized_frame unknown = {sym_intern(sym, "<unknown>"), sym_intern(sym, "??"), 0};
        if (unknown.name == NULL || unknown.filename == NULL)
            return -CUPROF_EHOSTMEM;
        if (cap > 0)
            out[0] = unknown;
        *count = 1;
        return 0;
    }
    /* Only once the program has unloaded a library can an address change hands. */
    if (unloaded_modules_count() != 0 && sym_forget_modules_if_changed(sym) != 0)
        return -CUPROF_EHOSTMEM;
    size_t i = hash_ip(ip) & sym->cache_mask;
    for (; sym->cache[i].ip != 0; i = (i + 1) & sym->cache_mask) {
        if (sym->cache[i].ip == ip)
            goto hit;
    }
    /* Miss: resolve ip - 1 (a return address points after its call). */
    struct symbolized_frame tmp[SYM_MAX_INLINE];
    int n = sym_resolve(sym, ip > 0 ? ip - 1 : 0, tmp);
    if (n < 0)
        return -CUPROF_EHOSTMEM;
    if (sym->frame_count + (size_t)n > sym->frame_cap) {
        size_t fcap = sym->frame_cap == 0 ? 1024 : sym->frame_cap * 2;
        struct symbolized_frame *grown = realloc(sym->frames, fcap * sizeof(*grown));
        if (grown == NULL)
            return -CUPROF_EHOSTMEM;
        sym->frames = grown;
        sym->frame_cap = fcap;
    }
    if ((sym->cache_used + 1) * 2 > sym->cache_mask + 1) {
        if (sym_cache_grow(sym) != 0)
            return -CUPROF_EHOSTMEM;
        i = hash_ip(ip) & sym->cache_mask;
        while (sym->cache[i].ip != 0)
            i = (i + 1) & sym->cache_mask;
    }
    memcpy(sym->frames + sym->frame_count, tmp, (size_t)n * sizeof(*tmp));
    sym->cache[i] = (struct sym_cache_slot){ip, (uint32_t)sym->frame_count, (uint32_t)n};
    sym->frame_count += (size_t)n;
    sym->cache_used++;
    sym->resolved++;
hit:;
    const struct sym_cache_slot *slot = &sym->cache[i];
    size_t copy = slot->count < cap ? slot->count : cap;
    if (copy > 0)
        memcpy(out, sym->frames + slot->first, copy * sizeof(*out));
    *count = slot->count;
    return 0;
}
