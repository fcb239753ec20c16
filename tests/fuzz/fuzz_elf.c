/* fuzz_elf: libFuzzer target for elf_symbols (the ELF symbol tables read without libdw): any
 * bytes as a file. Oracle: no crash or sanitizer report; a table that opens answers lookups at
 * addresses taken from the input with a NUL-terminated name or NULL.
 * Lock: none. Hot path: n/a (fuzzing). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "snapshot/elf_symbols.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz_elf", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size > 0 && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    struct elf_symbols *s = elf_symbols_open(path);
    if (s != NULL) {
        uint64_t probes[10] = {0, 1, UINT64_MAX, UINT64_MAX / 2};
        for (size_t i = 4; i < 10 && (i - 4) * 8 + 8 <= size; i++)
            memcpy(&probes[i], data + (i - 4) * 8, 8);
        for (size_t i = 0; i < 10; i++) {
            const char *name = elf_symbols_find(s, probes[i]);
            if (name != NULL && strlen(name) > size)
                abort(); /* a name longer than the whole file came from outside it */
        }
        (void)elf_symbols_count(s);
        elf_symbols_close(s);
    }
    close(fd);
    return 0;
}
