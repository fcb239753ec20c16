/* elf_imports.c: the dynamic section's relocation tables, walked for imports (see
 * elf_imports.h). */
#include "snapshot/elf_imports.h"

#include "snapshot/loader_gate.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void
elf_image_from_phdrs(const struct dl_phdr_info *info, struct elf_image *out)
{
    memset(out, 0, sizeof *out);
    out->base = info->dlpi_addr;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_DYNAMIC) {
            out->dynamic = (const ElfW(Dyn) *)start;
        } else if (ph->p_type == PT_GNU_RELRO) {
            out->relro_lo = start;
            out->relro_hi = start + ph->p_memsz;
        }
    }
}

struct image_query {
    const struct link_map *map;
    struct elf_image *out;
    bool found;
};

static int
image_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    struct image_query *q = data;
    (void)size;
    const char *name = info->dlpi_name != NULL ? info->dlpi_name : "";
    if (info->dlpi_addr != q->map->l_addr || strcmp(name, q->map->l_name) != 0)
        return 0;
    elf_image_from_phdrs(info, q->out);
    q->found = true;
    return 1;
}

bool
elf_image_of_handle(void *handle, struct elf_image *out)
{
    struct link_map *map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == NULL || map->l_name == NULL)
        return false;
    struct image_query q = {map, out, false};
    loader_gate_iterate(image_cb, &q);
    return q.found && out->dynamic != NULL;
}

struct dyn_tables {
    const ElfW(Sym) * symtab;
    const char *strtab;
    const ElfW(Rela) * jmprel, *rela;
    size_t jmprel_size, rela_size;
    bool plt_is_rela;
};

static struct dyn_tables
read_dynamic(const struct elf_image *image)
{
    struct dyn_tables t = {.plt_is_rela = true};
    for (const ElfW(Dyn) *d = image->dynamic; d != NULL && d->d_tag != DT_NULL; d++) {
        /* ld.so has relocated these entries on this architecture; be safe if it has not. */
        ElfW(Addr) p = d->d_un.d_ptr < image->base ? d->d_un.d_ptr + image->base : d->d_un.d_ptr;
        switch (d->d_tag) {
        case DT_SYMTAB:
            t.symtab = (const ElfW(Sym) *)p;
            break;
        case DT_STRTAB:
            t.strtab = (const char *)p;
            break;
        case DT_JMPREL:
            t.jmprel = (const ElfW(Rela) *)p;
            break;
        case DT_PLTRELSZ:
            t.jmprel_size = d->d_un.d_val;
            break;
        case DT_RELA:
            t.rela = (const ElfW(Rela) *)p;
            break;
        case DT_RELASZ:
            t.rela_size = d->d_un.d_val;
            break;
        case DT_PLTREL:
            t.plt_is_rela = d->d_un.d_val == DT_RELA;
            break;
        default:
            break;
        }
    }
    return t;
}

static bool
is_binding_reloc(ElfW(Xword) info)
{
#if defined(__x86_64__)
    return ELF64_R_TYPE(info) == R_X86_64_JUMP_SLOT || ELF64_R_TYPE(info) == R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
    return ELF64_R_TYPE(info) == R_AARCH64_JUMP_SLOT || ELF64_R_TYPE(info) == R_AARCH64_GLOB_DAT;
#else
    (void)info;
    return false;
#endif
}

/* false when fn stopped the walk */
static bool
each_in(const struct elf_image *image, const struct dyn_tables *t, const ElfW(Rela) * rel,
        size_t size, elf_import_fn fn, void *context)
{
    if (rel == NULL || t->symtab == NULL || t->strtab == NULL)
        return true;
    for (size_t i = 0; i < size / sizeof *rel; i++) {
        if (!is_binding_reloc(rel[i].r_info))
            continue;
        const ElfW(Sym) *sym = &t->symtab[ELF64_R_SYM(rel[i].r_info)];
        if (sym->st_shndx != SHN_UNDEF)
            continue;
        if (!fn((void **)(image->base + rel[i].r_offset), t->strtab + sym->st_name, context))
            return false;
    }
    return true;
}

void
elf_imports_each(const struct elf_image *image, elf_import_fn fn, void *context)
{
    struct dyn_tables t = read_dynamic(image);
    if (t.plt_is_rela && !each_in(image, &t, t.jmprel, t.jmprel_size, fn, context))
        return;
    (void)each_in(image, &t, t.rela, t.rela_size, fn, context);
}

int
elf_imports_write(const struct elf_image *image, void **slot, void *target)
{
    uintptr_t at = (uintptr_t)slot;
    bool relro = at >= image->relro_lo && at < image->relro_hi;
    uintptr_t page = at & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
    size_t len = at + sizeof(void *) - page;
    if (relro && mprotect((void *)page, len, PROT_READ | PROT_WRITE) != 0)
        return errno;
    __atomic_store_n(slot, target, __ATOMIC_RELEASE);
    if (relro && mprotect((void *)page, len, PROT_READ) != 0)
        return errno;
    return 0;
}
