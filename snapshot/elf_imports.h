/* elf_imports.h: a loaded object's imports as its relocations name them (the GOT slots the loader
 *   binds to other objects' functions), and rewriting one slot, RELRO pages included.
 * Locking: none; callers serialize the writes to one object's slots.
 * Hot path: no (start-up, dlopen). */
#ifndef CUPROF_ELF_IMPORTS_H
#define CUPROF_ELF_IMPORTS_H

#include <link.h>
#include <stdbool.h>
#include <stdint.h>

struct elf_image {
    ElfW(Addr) base;
    const ElfW(Dyn) * dynamic;
    uintptr_t relro_lo, relro_hi; /* PT_GNU_RELRO: read-only once relocated */
};

/* The image of a dl_iterate_phdr entry. */
void elf_image_from_phdrs(const struct dl_phdr_info *info, struct elf_image *out);

/* The image of the object behind a dlopen handle; false when the loader does not list it. */
bool elf_image_of_handle(void *handle, struct elf_image *out);

/* Called for each slot the loader binds to an undefined symbol (JUMP_SLOT and GLOB_DAT
 * relocations) with the symbol's name; returning false stops the walk. */
typedef bool (*elf_import_fn)(void **slot, const char *name, void *context);
void elf_imports_each(const struct elf_image *image, elf_import_fn fn, void *context);

/* Stores `target` in `slot`, unprotecting a RELRO page for the store. 0 or an errno. */
__attribute__((warn_unused_result)) int elf_imports_write(const struct elf_image *image,
                                                          void **slot, void *target);

#endif
