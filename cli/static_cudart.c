/* static_cudart.c: finds NVIDIA's CUDA runtime linked into a program. The runtime, static or
 * shared, loads the driver itself (dlopen "libcuda.so.1") and needs its private tables
 * (cuGetExportTable), so both names sit in its read-only data; a program built with
 * `-cudart shared` or by gcc has neither there (it names libcudart.so.13 as DT_NEEDED instead, or
 * no runtime at all). The check reads only the ELF file: section headers when present (strip
 * keeps them), else the program headers (sstrip'd files). */
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/static_cudart.h"

static bool
is_exec_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

bool
static_cudart_resolve(const char *prog, char *out, size_t len)
{
    if (prog == NULL || prog[0] == '\0')
        return false;
    if (strchr(prog, '/') != NULL)
        return (size_t)snprintf(out, len, "%s", prog) < len && is_exec_file(out);
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin"; /* glibc's execvp default */
    for (const char *p = path;; p++) {
        size_t n = strcspn(p, ":");
        /* An empty entry is the current folder, as for execvp. */
        int w = n == 0 ? snprintf(out, len, "%s", prog)
                       : snprintf(out, len, "%.*s/%s", (int)n, p, prog);
        if (w > 0 && (size_t)w < len && is_exec_file(out))
            return true;
        p += n;
        if (*p == '\0')
            return false;
    }
}

/* The mapped file and what was found in it. */
struct scan {
    const unsigned char *base;
    size_t size;
    bool has_driver_name;  /* "libcuda.so.1" */
    bool has_export_table; /* "cuGetExportTable" */
    bool needs_cudart;     /* a DT_NEEDED libcudart.so.* */
};

static bool
in_file(const struct scan *s, uint64_t off, uint64_t len)
{
    return off <= s->size && len <= s->size - off;
}

static void
scan_bytes(struct scan *s, uint64_t off, uint64_t len)
{
    static const char driver[] = "libcuda.so.1", table[] = "cuGetExportTable";
    if (!in_file(s, off, len) || len == 0)
        return;
    /* Both as NUL-terminated strings (sizeof includes the NUL). */
    if (memmem(s->base + off, len, driver, sizeof driver) != NULL)
        s->has_driver_name = true;
    if (memmem(s->base + off, len, table, sizeof table) != NULL)
        s->has_export_table = true;
}

/* The DT_NEEDED names of a dynamic array at [off, off+len) whose strings start at strtab. */
static void
scan_needed(struct scan *s, uint64_t off, uint64_t len, uint64_t strtab, uint64_t strsz)
{
    if (!in_file(s, off, len) || !in_file(s, strtab, strsz))
        return;
    for (uint64_t i = 0; i + sizeof(Elf64_Dyn) <= len; i += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        memcpy(&d, s->base + off + i, sizeof d);
        if (d.d_tag == DT_NULL)
            break;
        if (d.d_tag != DT_NEEDED || d.d_un.d_val >= strsz)
            continue;
        const char *name = (const char *)s->base + strtab + d.d_un.d_val;
        size_t room = (size_t)(strsz - d.d_un.d_val);
        if (room > 10 && memchr(name, '\0', room) != NULL && strncmp(name, "libcudart", 9) == 0)
            s->needs_cudart = true;
    }
}

/* Headers are copied out: the file gives no alignment guarantee. */
static void
section(const struct scan *s, const Elf64_Ehdr *eh, size_t i, Elf64_Shdr *out)
{
    memcpy(out, s->base + eh->e_shoff + i * sizeof *out, sizeof *out);
}

static void
scan_sections(struct scan *s, const Elf64_Ehdr *eh)
{
    for (size_t i = 0; i < eh->e_shnum; i++) {
        Elf64_Shdr sh;
        section(s, eh, i, &sh);
        if (sh.sh_type == SHT_DYNAMIC && sh.sh_link < eh->e_shnum) {
            Elf64_Shdr str;
            section(s, eh, sh.sh_link, &str);
            scan_needed(s, sh.sh_offset, sh.sh_size, str.sh_offset, str.sh_size);
        } else if (sh.sh_type == SHT_PROGBITS && (sh.sh_flags & SHF_ALLOC) &&
                   !(sh.sh_flags & SHF_EXECINSTR)) {
            scan_bytes(s, sh.sh_offset, sh.sh_size);
        }
    }
}

/* The file offset of a virtual address, through the PT_LOAD segments. */
static bool
file_offset(const struct scan *s, const Elf64_Ehdr *eh, uint64_t vaddr, uint64_t *off)
{
    for (size_t i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, s->base + eh->e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz) {
            *off = ph.p_offset + (vaddr - ph.p_vaddr);
            return true;
        }
    }
    return false;
}

/* No section headers: the non-executable loaded data, less the dynamic string table (where a
 * program linked with -lcuda names libcuda.so.1 and its imports). */
static void
scan_segments(struct scan *s, const Elf64_Ehdr *eh)
{
    uint64_t strtab = 0, strsz = 0, dyn_off = 0, dyn_len = 0;
    for (size_t i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, s->base + eh->e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_type != PT_DYNAMIC || !in_file(s, ph.p_offset, ph.p_filesz))
            continue;
        dyn_off = ph.p_offset;
        dyn_len = ph.p_filesz;
        for (uint64_t j = 0; j + sizeof(Elf64_Dyn) <= dyn_len; j += sizeof(Elf64_Dyn)) {
            Elf64_Dyn d;
            memcpy(&d, s->base + dyn_off + j, sizeof d);
            if (d.d_tag == DT_STRTAB && !file_offset(s, eh, d.d_un.d_ptr, &strtab))
                strtab = 0;
            else if (d.d_tag == DT_STRSZ)
                strsz = d.d_un.d_val;
        }
    }
    if (dyn_len > 0 && strtab > 0)
        scan_needed(s, dyn_off, dyn_len, strtab, strsz);
    for (size_t i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, s->base + eh->e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) || !in_file(s, ph.p_offset, ph.p_filesz))
            continue;
        uint64_t lo = ph.p_offset, hi = ph.p_offset + ph.p_filesz;
        if (strsz > 0 && in_file(s, strtab, strsz) && strtab >= lo && strtab + strsz <= hi) {
            scan_bytes(s, lo, strtab - lo);
            scan_bytes(s, strtab + strsz, hi - strtab - strsz);
        } else {
            scan_bytes(s, lo, ph.p_filesz);
        }
    }
}

static bool
headers_fit(const struct scan *s, const Elf64_Ehdr *eh)
{
    return eh->e_phentsize == sizeof(Elf64_Phdr) &&
           in_file(s, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr));
}

bool
static_cudart_linked(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return false;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return false;
    struct scan s = {.base = map, .size = (size_t)st.st_size};
    Elf64_Ehdr eh;
    memcpy(&eh, s.base, sizeof eh);
    /* 64-bit little-endian programs only: the runtime ships for x86-64 and aarch64 Linux. */
    bool elf = memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
               eh.e_ident[EI_DATA] == ELFDATA2LSB && (eh.e_type == ET_EXEC || eh.e_type == ET_DYN);
    if (elf && eh.e_shoff != 0 && eh.e_shnum > 0 && eh.e_shentsize == sizeof(Elf64_Shdr) &&
        in_file(&s, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)))
        scan_sections(&s, &eh);
    else if (elf && headers_fit(&s, &eh))
        scan_segments(&s, &eh);
    munmap(map, (size_t)st.st_size);
    return s.has_driver_name && s.has_export_table && !s.needs_cudart;
}
