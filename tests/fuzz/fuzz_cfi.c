/* fuzz_cfi: libFuzzer target for cfi_rule_at (snapshot/cfi.c), the reader of .eh_frame records
 * behind cuprof's unwinder. Input: a 4-byte little-endian pc offset, a 2-byte FDE offset, 2
 * spare bytes, then the section. Oracle: no read outside the section (ASan), no undefined
 * behaviour (UBSan), and a rule only for a pc inside the FDE's range, with its fields in range.
 * Lock: none. Hot path: n/a (fuzzing). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/cfi.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    int32_t pc_off;
    uint16_t fde_off;
    memcpy(&pc_off, data, 4);
    memcpy(&fde_off, data + 4, 2);
    size_t len = size - 8;
    /* A copy of exactly the section, so that ASan sees any read past its end. */
    uint8_t *section = malloc(len > 0 ? len : 1);
    if (section == NULL)
        return 0;
    memcpy(section, data + 8, len);
    uintptr_t lo = (uintptr_t)section, hi = lo + len;
    struct cfi_bases bases = {lo, lo + 64};
    uintptr_t pc = lo + (uintptr_t)(intptr_t)pc_off;
    struct cfi_rule r;
    if (fde_off <= len && cfi_rule_at(section + fde_off, lo, hi, &bases, pc, &r) == 0) {
        if (pc < r.begin || pc >= r.end)
            abort(); /* a rule for a pc outside its FDE */
        if (r.frame != CFI_FRAME_CALL && r.frame != CFI_FRAME_SIGNAL &&
            r.frame != CFI_FRAME_OUTERMOST)
            abort();
        if (!r.rbp_saved && r.rbp_off != 0)
            abort();
    }
    free(section);
    return 0;
}
