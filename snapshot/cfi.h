/* cfi.h: reads one function's call frame information (an .eh_frame FDE and its CIE, as gcc,
 *   clang and glibc write them for x86-64) and says how its caller's frame is found at one pc:
 *   the rule cuprof's unwinder (unwind.h) caches per return address.
 * Locking: none (a pure function of the bytes it is given).
 * Hot path: no (once per return address never seen before), but callable where a capture runs:
 *   no allocation, no lock, every byte read inside the bounds given (tests/fuzz/fuzz_cfi.c). */
#ifndef CUPROF_CFI_H
#define CUPROF_CFI_H

#include <stdbool.h>
#include <stdint.h>

/* DWARF's register numbers for x86-64 that a rule names. */
#define CFI_REG_RBP 6
#define CFI_REG_RSP 7

enum cfi_frame {
    CFI_FRAME_CALL,      /* CFA = rsp or rbp + offset; return address and rbp at CFA + offsets */
    CFI_FRAME_SIGNAL,    /* a signal trampoline (augmentation "S"): registers in its ucontext */
    CFI_FRAME_OUTERMOST, /* the return address is undefined: the first frame of a thread */
};

/* How the caller's registers are found from this frame's rsp and rbp at the pc asked about. */
struct cfi_rule {
    enum cfi_frame frame;
    bool cfa_rbp;    /* CFA = rbp + cfa_off, else rsp + cfa_off (CFI_FRAME_CALL) */
    bool rbp_saved;  /* the caller's rbp is at CFA + rbp_off, else rbp is left unchanged */
    int64_t cfa_off; /* the CFA is the caller's rsp */
    int64_t rbp_off;
    int64_t ra_off;       /* the return address is at CFA + ra_off */
    uintptr_t begin, end; /* the FDE's code: [begin, end) */
};

/* Bases for pointers encoded relative to the text or data segment (DW_EH_PE_textrel, _datarel),
 * as libgcc's _Unwind_Find_FDE reports them. */
struct cfi_bases {
    uintptr_t text;
    uintptr_t data;
};

/* The rule at `pc` of the FDE at `fde` (the address of its length field). Reads only bytes in
 * [lo, hi): pass 0 and UINTPTR_MAX for sections the loader mapped. Returns 0, or -1 when the
 * record is malformed, `pc` lies outside the FDE, or the frame is one the rule cannot express
 * (a CFA computed by an expression or from another register, rbp or the return address saved
 * other than at an offset from the CFA, an unknown augmentation or instruction): libgcc's own
 * unwinder then walks that stack. */
__attribute__((warn_unused_result)) int cfi_rule_at(const uint8_t *fde, uintptr_t lo, uintptr_t hi,
                                                    const struct cfi_bases *bases, uintptr_t pc,
                                                    struct cfi_rule *out);

#endif
