/* elf_symbols.h: the function symbols of one ELF file (its .symtab, else its .dynsym), looked up
 *   by address: what names a frame when libdw.so.1 is not installed (dladdr sees exported
 *   functions only, so a program's own `main` or a library's internal functions would be
 *   "module+0x…").
 * Locking: none: a table belongs to one symbolizer.
 * Hot path: no (dump time: maps the file, sorts its function symbols once). */
#ifndef CUPROF_ELF_SYMBOLS_H
#define CUPROF_ELF_SYMBOLS_H

#include <stdint.h>

struct elf_symbols;

/* The function symbols of the ELF file at path; NULL when it cannot be read, is not a 64-bit
 * ELF file of this byte order, has no symbol table, or memory runs out (callers fall back). The
 * file stays mapped (read-only, never written) until elf_symbols_close. */
struct elf_symbols *elf_symbols_open(const char *path);

/* The raw (possibly mangled) name of the function whose [value, value + size) holds vaddr, an
 * address in the file's own layout (a runtime address minus the module's load bias); NULL when
 * no sized function symbol holds it. The name lives in the mapping. */
const char *elf_symbols_find(const struct elf_symbols *symbols, uint64_t vaddr);

/* Number of function symbols kept (a test figure). */
uint64_t elf_symbols_count(const struct elf_symbols *symbols);

void elf_symbols_close(struct elf_symbols *symbols);

#endif
