/* cfi.c: a bounded reader of .eh_frame records (DWARF CFI with the LSB's augmentations) and the
 * interpreter of their call frame instructions up to one pc, keeping the rules of the three
 * registers an x86-64 unwinder needs (CFA, rbp, return address). Mirrors libgcc's
 * unwind-dw2.c (extract_cie_info, execute_cfa_program) where the two could differ. */
#include "snapshot/cfi.h"

#include <string.h>

#define DW_EH_PE_omit     0xffu
#define DW_EH_PE_indirect 0x80u
#define CFI_STATES        8u /* DW_CFA_remember_state nesting kept */
#define CFI_AUG_MAX       8u /* letters of an augmentation string */

/* A reader over [p, end); any read past end sets `bad` and reads zeros. */
struct cursor {
    uintptr_t p, end;
    bool bad;
};

static uint64_t
rd_fixed(struct cursor *c, unsigned n)
{
    uint64_t v = 0;
    if (c->bad || c->end - c->p < n) {
        c->bad = true;
        return 0;
    }
    memcpy(&v, (const void *)c->p, n); /* x86-64: little-endian, as the records are */
    c->p += n;
    return v;
}

static uint8_t
rd_u8(struct cursor *c)
{
    return (uint8_t)rd_fixed(c, 1);
}

static uint64_t
rd_uleb(struct cursor *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
        uint8_t b = rd_u8(c);
        if (shift < 64)
            v |= (uint64_t)(b & 0x7fu) << shift;
        if (c->bad || !(b & 0x80u))
            return v;
        if (shift >= 63) { /* 10 bytes: more would not fit 64 bits */
            c->bad = true;
            return 0;
        }
    }
}

static int64_t
rd_sleb(struct cursor *c)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    do {
        b = rd_u8(c);
        if (shift < 64)
            v |= (uint64_t)(b & 0x7fu) << shift;
        shift += 7;
        if ((b & 0x80u) && shift >= 70) {
            c->bad = true;
            return 0;
        }
    } while (!c->bad && (b & 0x80u));
    if (shift < 64 && (b & 0x40u))
        v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

static void
skip(struct cursor *c, uint64_t n)
{
    if (c->bad || c->end - c->p < n)
        c->bad = true;
    else
        c->p += (uintptr_t)n;
}

/* A pointer written with DW_EH_PE encoding `enc`. `value_only`: the format alone (an FDE's
 * address range), and an indirect pointer is not followed (a personality routine is skipped). */
static uint64_t
rd_encoded(struct cursor *c, uint8_t enc, const struct cfi_bases *bases, bool value_only)
{
    uintptr_t field = c->p;
    uint64_t v = 0;
    switch (enc & 0x0fu) {
    case 0x00: /* absptr */
    case 0x04: /* udata8 */
    case 0x08: /* signed absptr */
    case 0x0c: /* sdata8 */
        v = rd_fixed(c, 8);
        break;
    case 0x01:
        v = rd_uleb(c);
        break;
    case 0x02:
        v = rd_fixed(c, 2);
        break;
    case 0x03:
        v = rd_fixed(c, 4);
        break;
    case 0x09:
        v = (uint64_t)rd_sleb(c);
        break;
    case 0x0a:
        v = (uint64_t)(int64_t)(int16_t)rd_fixed(c, 2);
        break;
    case 0x0b:
        v = (uint64_t)(int64_t)(int32_t)rd_fixed(c, 4);
        break;
    default:
        c->bad = true;
        return 0;
    }
    if (value_only)
        return v;
    switch (enc & 0x70u) {
    case 0x00:
        break;
    case 0x10: /* pcrel: from the field itself */
        v += field;
        break;
    case 0x20:
        v += bases->text;
        break;
    case 0x30:
        v += bases->data;
        break;
    default: /* funcrel, aligned: never written for x86-64 code addresses */
        c->bad = true;
        return 0;
    }
    if (enc & DW_EH_PE_indirect)
        c->bad = true; /* gcc never writes an FDE's addresses indirect */
    return v;
}

/* One record's extent: its body follows the 4-byte length. The 64-bit form (length 0xffffffff)
 * is refused, as libgcc does not read it either. */
static bool
record_open(uintptr_t at, uintptr_t lo, uintptr_t hi, struct cursor *body)
{
    if (at < lo || at > hi)
        return false;
    struct cursor c = {at, hi, false};
    uint64_t len = rd_fixed(&c, 4);
    if (c.bad || len == 0 || len == 0xffffffffu || len > hi - c.p)
        return false;
    *body = (struct cursor){c.p, c.p + (uintptr_t)len, false};
    return true;
}

struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    bool z, signal;
    struct cursor insn; /* the initial instructions */
};

static bool
cie_augmentation(struct cursor *c, const char *aug, const struct cfi_bases *bases, struct cie *cie)
{
    if (aug[0] != 'z')
        return aug[0] == '\0'; /* gcc's pre-"z" "eh" and others: libgcc's unwinder */
    cie->z = true;
    uint64_t len = rd_uleb(c);
    if (c->bad || c->end - c->p < len)
        return false;
    struct cursor data = {c->p, c->p + (uintptr_t)len, false};
    for (const char *a = aug + 1; *a != '\0' && !data.bad; a++) {
        switch (*a) {
        case 'L': /* the LSDA's encoding */
            (void)rd_u8(&data);
            break;
        case 'P': { /* the personality routine: skipped */
            uint8_t enc = rd_u8(&data);
            (void)rd_encoded(&data, enc, bases, true);
            break;
        }
        case 'R':
            cie->fde_enc = rd_u8(&data);
            break;
        case 'S':
            cie->signal = true;
            break;
        case 'B': /* aarch64 BTI, MTE: nothing to read */
        case 'G':
            break;
        default:
            return false;
        }
    }
    c->p = data.end;
    return !data.bad;
}

static bool
cie_read(uintptr_t at, uintptr_t lo, uintptr_t hi, const struct cfi_bases *bases, struct cie *cie)
{
    struct cursor c;
    if (!record_open(at, lo, hi, &c) || rd_fixed(&c, 4) != 0) /* CIE id 0: a CIE */
        return false;
    uint8_t version = rd_u8(&c);
    if (version != 1 && version != 3 && version != 4)
        return false;
    char aug[CFI_AUG_MAX + 1];
    size_t n = 0;
    for (char ch; (ch = (char)rd_u8(&c)) != '\0' && !c.bad;)
        if (n == CFI_AUG_MAX)
            return false;
        else
            aug[n++] = ch;
    aug[n] = '\0';
    if (version == 4 && (rd_u8(&c) != 8 || rd_u8(&c) != 0)) /* address and segment sizes */
        return false;
    *cie = (struct cie){.fde_enc = 0};
    cie->code_align = rd_uleb(&c);
    cie->data_align = rd_sleb(&c);
    cie->ra_reg = version == 1 ? rd_u8(&c) : rd_uleb(&c);
    if (c.bad || cie->ra_reg == CFI_REG_RBP || cie->ra_reg == CFI_REG_RSP ||
        !cie_augmentation(&c, aug, bases, cie) || cie->fde_enc == DW_EH_PE_omit)
        return false;
    cie->insn = c;
    return !c.bad;
}

/* ---- the rules at one pc ---- */

enum how { HOW_SAME, HOW_UNDEF, HOW_OFFSET, HOW_OTHER };

struct reg_rule {
    enum how how;
    int64_t off;
};

struct row {
    bool cfa_expr;
    uint64_t cfa_reg;
    int64_t cfa_off;
    struct reg_rule rbp, rsp, ra;
};

struct program {
    const struct cie *cie;
    const struct cfi_bases *bases;
    const struct row *initial; /* the CIE's row, for DW_CFA_restore; NULL while it runs */
    uintptr_t pc;
    uintptr_t loc;
};

/* The rule of `reg` in `row`, or NULL for a register the unwinder does not follow. */
static struct reg_rule *
column(struct row *row, const struct program *pr, uint64_t reg)
{
    if (reg == CFI_REG_RBP)
        return &row->rbp;
    if (reg == CFI_REG_RSP)
        return &row->rsp;
    return reg == pr->cie->ra_reg ? &row->ra : NULL;
}

static void
set_rule(struct row *row, const struct program *pr, uint64_t reg, enum how how, int64_t off)
{
    struct reg_rule *r = column(row, pr, reg);
    if (r != NULL)
        *r = (struct reg_rule){how, off};
}

/* DW_CFA_restore: the rule the CIE's instructions left (none while they run). */
static bool
restore_rule(struct row *row, const struct program *pr, uint64_t reg)
{
    if (pr->initial == NULL)
        return false;
    struct row initial = *pr->initial;
    struct reg_rule *r = column(row, pr, reg);
    if (r != NULL)
        *r = *column(&initial, pr, reg);
    return true;
}

static bool
advance(struct program *pr, uint64_t delta)
{
    uint64_t code_align = pr->cie->code_align;
    if (code_align != 0 && delta > (UINTPTR_MAX - pr->loc) / code_align)
        return false;
    pr->loc += (uintptr_t)(delta * code_align);
    return true;
}

/* A factored offset: DWARF multiplies by the data alignment (wrapping, never undefined). */
static int64_t
factored(const struct program *pr, uint64_t n)
{
    return (int64_t)(n * (uint64_t)pr->cie->data_align);
}

/* The instructions that define the CFA (DW_CFA_def_cfa*): register, offset or an expression. */
static void
run_cfa(struct cursor *c, const struct program *pr, struct row *row, uint8_t op)
{
    row->cfa_expr = op == 0x0f;
    if (op == 0x0f) {
        skip(c, rd_uleb(c));
        return;
    }
    if (op == 0x0c || op == 0x0d || op == 0x12)
        row->cfa_reg = rd_uleb(c);
    if (op == 0x0c || op == 0x0e)
        row->cfa_off = (int64_t)rd_uleb(c);
    else if (op == 0x12 || op == 0x13)
        row->cfa_off = factored(pr, (uint64_t)rd_sleb(c));
}

/* The instructions of DWARF 4 section 6.4.2 and the GNU ones gcc writes; any other one (and
 * DW_CFA_GNU_window_save, SPARC's and aarch64's) leaves the frame to libgcc. */
static bool
run_one(struct cursor *c, struct program *pr, struct row *row, struct row *stack, unsigned *depth)
{
    uint8_t op = rd_u8(c);
    uint64_t reg;
    switch (op >> 6) {
    case 1:
        return advance(pr, op & 0x3fu);
    case 2:
        set_rule(row, pr, op & 0x3fu, HOW_OFFSET, factored(pr, rd_uleb(c)));
        return true;
    case 3:
        return restore_rule(row, pr, op & 0x3fu);
    default:
        break;
    }
    switch (op) {
    case 0x00: /* nop */
        return true;
    case 0x01: /* set_loc */
        pr->loc = (uintptr_t)rd_encoded(c, pr->cie->fde_enc, pr->bases, false);
        return true;
    case 0x02:
        return advance(pr, rd_u8(c));
    case 0x03:
        return advance(pr, rd_fixed(c, 2));
    case 0x04:
        return advance(pr, rd_fixed(c, 4));
    case 0x05: /* offset_extended */
        reg = rd_uleb(c);
        set_rule(row, pr, reg, HOW_OFFSET, factored(pr, rd_uleb(c)));
        return true;
    case 0x06: /* restore_extended */
        return restore_rule(row, pr, rd_uleb(c));
    case 0x07: /* undefined */
        set_rule(row, pr, rd_uleb(c), HOW_UNDEF, 0);
        return true;
    case 0x08: /* same_value */
        set_rule(row, pr, rd_uleb(c), HOW_SAME, 0);
        return true;
    case 0x09: /* register */
        reg = rd_uleb(c);
        (void)rd_uleb(c);
        set_rule(row, pr, reg, HOW_OTHER, 0);
        return true;
    case 0x0a: /* remember_state: the CFA too, as libgcc and LLVM's libunwind keep it */
        if (*depth == CFI_STATES)
            return false;
        stack[(*depth)++] = *row;
        return true;
    case 0x0b: /* restore_state */
        if (*depth == 0)
            return false;
        *row = stack[--*depth];
        return true;
    case 0x0c: /* def_cfa */
    case 0x0d: /* def_cfa_register */
    case 0x0e: /* def_cfa_offset */
    case 0x0f: /* def_cfa_expression */
    case 0x12: /* def_cfa_sf */
    case 0x13: /* def_cfa_offset_sf */
        run_cfa(c, pr, row, op);
        return true;
    case 0x10: /* expression */
    case 0x16: /* val_expression */
        reg = rd_uleb(c);
        skip(c, rd_uleb(c));
        set_rule(row, pr, reg, HOW_OTHER, 0);
        return true;
    case 0x11: /* offset_extended_sf */
        reg = rd_uleb(c);
        set_rule(row, pr, reg, HOW_OFFSET, factored(pr, (uint64_t)rd_sleb(c)));
        return true;
    case 0x14: /* val_offset */
    case 0x15: /* val_offset_sf */
        reg = rd_uleb(c);
        (void)(op == 0x14 ? rd_uleb(c) : (uint64_t)rd_sleb(c));
        set_rule(row, pr, reg, HOW_OTHER, 0);
        return true;
    case 0x2e: /* GNU_args_size */
        (void)rd_uleb(c);
        return true;
    case 0x2f: /* GNU_negative_offset_extended */
        reg = rd_uleb(c);
        set_rule(row, pr, reg, HOW_OFFSET, -factored(pr, rd_uleb(c)));
        return true;
    default:
        return false;
    }
}

/* Runs instructions while the row they build still covers pc, as libgcc does (the rows of
 * locations <= pc; pc is a return address minus one). */
static bool
run(struct cursor c, struct program *pr, struct row *row)
{
    struct row stack[CFI_STATES];
    unsigned depth = 0;
    while (!c.bad && c.p < c.end && pr->loc <= pr->pc)
        if (!run_one(&c, pr, row, stack, &depth))
            return false;
    return !c.bad;
}

static int
rule_of_row(const struct row *row, struct cfi_rule *out)
{
    *out = (struct cfi_rule){.frame = CFI_FRAME_CALL};
    if (row->ra.how == HOW_UNDEF) {
        out->frame = CFI_FRAME_OUTERMOST;
        return 0;
    }
    if (row->cfa_expr || (row->cfa_reg != CFI_REG_RSP && row->cfa_reg != CFI_REG_RBP) ||
        row->ra.how != HOW_OFFSET || row->rsp.how != HOW_SAME ||
        (row->rbp.how != HOW_SAME && row->rbp.how != HOW_OFFSET))
        return -1;
    out->cfa_rbp = row->cfa_reg == CFI_REG_RBP;
    out->cfa_off = row->cfa_off;
    out->ra_off = row->ra.off;
    out->rbp_saved = row->rbp.how == HOW_OFFSET;
    out->rbp_off = out->rbp_saved ? row->rbp.off : 0;
    return 0;
}

int
cfi_rule_at(const uint8_t *fde, uintptr_t lo, uintptr_t hi, const struct cfi_bases *bases,
            uintptr_t pc, struct cfi_rule *out)
{
    struct cursor c;
    if (!record_open((uintptr_t)fde, lo, hi, &c))
        return -1;
    uintptr_t delta_at = c.p;
    uint64_t delta = rd_fixed(&c, 4); /* back from this field to the CIE; 0 would be a CIE */
    struct cie cie;
    if (c.bad || delta == 0 || delta > delta_at - lo ||
        !cie_read(delta_at - (uintptr_t)delta, lo, hi, bases, &cie))
        return -1;
    uintptr_t begin = (uintptr_t)rd_encoded(&c, cie.fde_enc, bases, false);
    uintptr_t range = (uintptr_t)rd_encoded(&c, cie.fde_enc, bases, true);
    if (cie.z)
        skip(&c, rd_uleb(&c));
    if (c.bad || pc < begin || pc - begin >= range || range > UINTPTR_MAX - begin)
        return -1;
    if (cie.signal) { /* glibc's __restore_rt: the ucontext holds the registers */
        *out = (struct cfi_rule){.frame = CFI_FRAME_SIGNAL, .begin = begin, .end = begin + range};
        return 0;
    }
    /* libgcc's state before any instruction: every register unchanged, no CFA. */
    struct row row = {.cfa_expr = true};
    struct program pr = {&cie, bases, NULL, pc, begin};
    if (!run(cie.insn, &pr, &row))
        return -1;
    struct row initial = row;
    pr.initial = &initial;
    if (!run(c, &pr, &row) || rule_of_row(&row, out) != 0)
        return -1;
    out->begin = begin;
    out->end = begin + range;
    return 0;
}
