/* elf_symbols.c: an ELF file mapped read-only, its function symbols sorted by address (see
 * elf_symbols.h). Every offset and size read from the file is checked against the file's size
 * before use: a truncated or corrupt file gives NULL, never a fault. */
#include "snapshot/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Looked back from the nearest lower start when functions overlap (aliases of different sizes). */
#define ELF_SYMBOLS_LOOK_BACK 8

struct elf_function {
    uint64_t start;
    uint64_t size;
    uint64_t name; /* offset in the string table */
};

struct elf_symbols {
    const unsigned char *map;
    size_t map_size;
    const char *strings; /* the symbol table's string table, inside map */
    uint64_t strings_size;
    struct elf_function *functions; /* by start, then by size */
    uint64_t count;
};

/* True when [offset, offset + size) lies inside a file of file_size bytes. */
static bool
in_file(uint64_t offset, uint64_t size, uint64_t file_size)
{
    return offset <= file_size && size <= file_size - offset;
}

/* Section header i, copied out (the mapping gives no alignment guarantee for a corrupt file). */
static bool
section(const struct elf_symbols *s, const Elf64_Ehdr *eh, uint64_t i, Elf64_Shdr *out)
{
    uint64_t offset = eh->e_shoff + i * sizeof(Elf64_Shdr);
    if (!in_file(offset, sizeof(Elf64_Shdr), s->map_size))
        return false;
    memcpy(out, s->map + offset, sizeof(*out));
    return true;
}

static bool
header_usable(const struct elf_symbols *s, Elf64_Ehdr *eh, uint64_t *sections)
{
    if (s->map_size < sizeof(*eh))
        return false;
    memcpy(eh, s->map, sizeof(*eh));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const unsigned char host_order = ELFDATA2LSB;
#else
    const unsigned char host_order = ELFDATA2MSB;
#endif
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != host_order || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shoff == 0 || eh->e_shoff > s->map_size)
        return false;
    *sections = eh->e_shnum;
    if (*sections == 0) { /* more than 0xff00 sections: the count is in section 0's size */
        Elf64_Shdr first;
        if (!section(s, eh, 0, &first))
            return false;
        *sections = first.sh_size;
    }
    return *sections <= (s->map_size - eh->e_shoff) / sizeof(Elf64_Shdr);
}

/* The first section of the given type, copied to *out. */
static bool
find_section(const struct elf_symbols *s, const Elf64_Ehdr *eh, uint64_t sections, uint32_t type,
             Elf64_Shdr *out)
{
    for (uint64_t i = 0; i < sections; i++)
        if (section(s, eh, i, out) && out->sh_type == type)
            return true;
    return false;
}

/* The symbol table to read (SHT_SYMTAB, else a stripped file's SHT_DYNSYM) and its string
 * table, checked. */
static bool
find_tables(struct elf_symbols *s, Elf64_Shdr *symtab)
{
    Elf64_Ehdr eh;
    uint64_t sections = 0;
    Elf64_Shdr strtab;
    if (!header_usable(s, &eh, &sections) || (!find_section(s, &eh, sections, SHT_SYMTAB, symtab) &&
                                              !find_section(s, &eh, sections, SHT_DYNSYM, symtab)))
        return false;
    if (symtab->sh_entsize != sizeof(Elf64_Sym) ||
        !in_file(symtab->sh_offset, symtab->sh_size, s->map_size) || symtab->sh_link >= sections ||
        !section(s, &eh, symtab->sh_link, &strtab) || strtab.sh_type != SHT_STRTAB ||
        strtab.sh_size == 0 || !in_file(strtab.sh_offset, strtab.sh_size, s->map_size))
        return false;
    s->strings = (const char *)s->map + strtab.sh_offset;
    s->strings_size = strtab.sh_size;
    return true;
}

static int
function_order(const void *a, const void *b)
{
    const struct elf_function *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return (x->size > y->size) - (x->size < y->size);
}

static bool
collect_functions(struct elf_symbols *s, const Elf64_Shdr *symtab)
{
    uint64_t total = symtab->sh_size / sizeof(Elf64_Sym);
    s->functions = malloc((total ? total : 1) * sizeof(*s->functions));
    if (s->functions == NULL)
        return false;
    const unsigned char *at = s->map + symtab->sh_offset;
    for (uint64_t i = 0; i < total; i++) {
        Elf64_Sym sym;
        memcpy(&sym, at + i * sizeof(sym), sizeof(sym));
        unsigned type = ELF64_ST_TYPE(sym.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
            sym.st_size == 0 || sym.st_value > UINT64_MAX - sym.st_size || sym.st_name == 0 ||
            sym.st_name >= s->strings_size)
            continue;
        s->functions[s->count++] = (struct elf_function){sym.st_value, sym.st_size, sym.st_name};
    }
    qsort(s->functions, s->count, sizeof(*s->functions), function_order);
    return s->count > 0;
}

struct elf_symbols *
elf_symbols_open(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    struct elf_symbols *s = calloc(1, sizeof(*s));
    void *map = MAP_FAILED;
    if (s != NULL && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        free(s);
        return NULL;
    }
    s->map = map;
    s->map_size = (size_t)st.st_size;
    Elf64_Shdr symtab;
    if (!find_tables(s, &symtab) || !collect_functions(s, &symtab)) {
        elf_symbols_close(s);
        return NULL;
    }
    return s;
}

const char *
elf_symbols_find(const struct elf_symbols *s, uint64_t vaddr)
{
    uint64_t lo = 0, hi = s->count; /* first function starting above vaddr */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (s->functions[mid].start <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (uint64_t back = 0; back < ELF_SYMBOLS_LOOK_BACK && lo > back; back++) {
        const struct elf_function *f = &s->functions[lo - 1 - back];
        if (vaddr - f->start < f->size) {
            const char *name = s->strings + f->name;
            /* Only a name that ends inside the string table. */
            return memchr(name, '\0', s->strings_size - f->name) != NULL ? name : NULL;
        }
    }
    return NULL;
}

uint64_t
elf_symbols_count(const struct elf_symbols *s)
{
    return s->count;
}

void
elf_symbols_close(struct elf_symbols *s)
{
    if (s == NULL)
        return;
    if (s->map != NULL)
        munmap((void *)s->map, s->map_size);
    free(s->functions);
    free(s);
}
