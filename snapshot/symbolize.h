/* symbolize.h: turns instruction pointers of this process into PyTorch frames {name, filename,
 *   line} with libdw (DWARF lines, inlined frames, demangled C++) or dladdr, at dump time.
 * Locking: none: a symbolizer belongs to one thread (the dumper).
 * Hot path: no (mallocs, reads /proc/self/maps and debug info). */
#ifndef CUPROF_SYMBOLIZE_H
#define CUPROF_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* PyTorch's frame dict. Without DWARF: name = the (demangled) ELF symbol or "<module>+0x<off>",
 * filename = the module's path, line 0. Unknown address: name "<unknown>", filename "??".
 * Without libdw.so.1 (dlopen'ed at the first symbolizer_create, never linked): the name of the
 * function from dladdr (exported symbols) or from the module's own ELF symbol table (.symtab,
 * else .dynsym), demangled, or "<module>+0x<off>"; the module's path, line 0. */
struct symbolized_frame {
    const char *name;
    const char *filename;
    int64_t line;
};

struct symbolizer;

/* NULL only if out of memory: when libdw is missing or cannot read this process's modules, the
 * symbolizer falls back to dladdr. */
struct symbolizer *symbolizer_create(void);

/* Frames for one return address (ip - 1 is looked up), innermost first: an ip inside inlined
 * code expands to the inlined functions and then the function they were inlined into. Writes
 * min(frames, cap) entries to out and the full frame count to *count. Results are cached per
 * ip (= per module and offset in this process). Strings stay owned by the symbolizer until
 * symbolizer_destroy, and equal strings share one pointer. Returns 0 or -CUPROF_EHOSTMEM. */
__attribute__((warn_unused_result)) int symbolizer_lookup(struct symbolizer *sym, uintptr_t ip,
                                                          struct symbolized_frame *out, size_t cap,
                                                          size_t *count);

/* Number of distinct ips resolved so far (cache misses): a test and bench figure. */
size_t symbolizer_resolved_count(const struct symbolizer *sym);

/* True when frames get their source file and line (libdw loaded and this process's modules
 * reported to it); false: function names only. */
bool symbolizer_reads_lines(const struct symbolizer *sym);

void symbolizer_destroy(struct symbolizer *sym);

#endif
