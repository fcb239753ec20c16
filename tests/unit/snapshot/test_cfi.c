/* test_cfi.c: the .eh_frame reader behind cuprof's unwinder on hand-made records, the rule at
 * each pc checked against what DWARF 4 section 6.4 and libgcc's unwind-dw2.c say: a prologue and
 * epilogue row by row, remember/restore_state (the CFA included), DW_CFA_restore, the thread's
 * outermost frame, signal frames, what it refuses (expressions, other registers, unknown
 * augmentations and versions, 64-bit lengths), and records cut short. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "snapshot/cfi.h"

#define FUNC_RANGE 0x40u

/* A CIE then one FDE in `buf`: the function lies 0x100 bytes past the FDE's address field. */
struct record {
    uint8_t buf[512];
    size_t len, fde;
    uintptr_t func;
};

static size_t
put(struct record *r, const void *bytes, size_t n)
{
    memcpy(r->buf + r->len, bytes, n);
    r->len += n;
    return r->len - n;
}

static void
put32(struct record *r, uint32_t v)
{
    put(r, &v, 4);
}

/* aug: augmentation string; aug_data: its data; cie_insns: after gcc's def_cfa rsp+8, ra at -8 */
static void
build(struct record *r, uint8_t version, const char *aug, const void *aug_data, size_t aug_len,
      const char *insns, size_t insns_len)
{
    memset(r, 0, sizeof(*r));
    uint8_t cie[128];
    size_t n = 0;
    memset(cie, 0, 4); /* CIE id */
    n = 4;
    cie[n++] = version;
    strcpy((char *)cie + n, aug);
    n += strlen(aug) + 1;
    if (version == 4) {
        cie[n++] = 8; /* address size */
        cie[n++] = 0; /* segment selector size */
    }
    cie[n++] = 1;    /* code alignment */
    cie[n++] = 0x78; /* data alignment -8 */
    cie[n++] = 16;   /* return address column */
    if (aug[0] == 'z') {
        cie[n++] = (uint8_t)aug_len;
        memcpy(cie + n, aug_data, aug_len);
        n += aug_len;
    }
    static const uint8_t initial[] = {0x0c, 0x07, 0x08, 0x90, 0x01};
    memcpy(cie + n, initial, sizeof(initial));
    n += sizeof(initial);
    while (n % 4)
        cie[n++] = 0;
    put32(r, (uint32_t)n);
    put(r, cie, n);
    r->fde = r->len;
    uint8_t body[256];
    size_t m = 0;
    uint32_t back = (uint32_t)(r->fde + 4); /* from the CIE pointer field to the CIE */
    memcpy(body, &back, 4);
    m = 4;
    uintptr_t field = (uintptr_t)(r->buf + r->fde + 8);
    r->func = field + 0x100;
    int32_t rel = 0x100;
    memcpy(body + m, &rel, 4);
    m += 4;
    uint32_t range = FUNC_RANGE;
    memcpy(body + m, &range, 4);
    m += 4;
    if (aug[0] == 'z')
        body[m++] = 0; /* no FDE augmentation data */
    memcpy(body + m, insns, insns_len);
    m += insns_len;
    while (m % 4)
        body[m++] = 0;
    put32(r, (uint32_t)m);
    put(r, body, m);
}

static const uint8_t zr_data[] = {0x1b}; /* R: pcrel sdata4 */

static int
rule_at(struct record *r, uintptr_t offset, struct cfi_rule *out)
{
    struct cfi_bases bases = {0, 0};
    uintptr_t lo = (uintptr_t)r->buf;
    return cfi_rule_at(r->buf + r->fde, lo, lo + r->len, &bases, r->func + offset, out);
}

static void
expect_call(struct record *r, uintptr_t offset, bool cfa_rbp, int64_t cfa_off, bool rbp_saved,
            int64_t rbp_off)
{
    struct cfi_rule got;
    assert_int_equal(rule_at(r, offset, &got), 0);
    assert_int_equal(got.frame, CFI_FRAME_CALL);
    assert_int_equal(got.cfa_rbp, cfa_rbp);
    assert_int_equal(got.cfa_off, cfa_off);
    assert_int_equal(got.rbp_saved, rbp_saved);
    assert_int_equal(got.rbp_off, rbp_off);
    assert_int_equal(got.ra_off, -8);
    assert_int_equal(got.begin, r->func);
    assert_int_equal(got.end, r->func + FUNC_RANGE);
}

#define INSNS(s) s, sizeof(s) - 1

static void
test_prologue_and_epilogue(void **state)
{
    (void)state;
    struct record r;
    /* push %rbp; mov %rsp,%rbp; ...; pop %rbp: gcc's -fno-omit-frame-pointer rows. */
    build(&r, 1, "zR", zr_data, 1,
          INSNS("\x41\x0e\x10\x86\x02" /* +1: CFA rsp+16, rbp at CFA-16 */
                "\x43\x0d\x06"         /* +4: CFA rbp+16 */
                "\x60\x0c\x07\x08"));  /* +0x24: CFA rsp+8 */
    expect_call(&r, 0, false, 8, false, 0);
    expect_call(&r, 1, false, 16, true, -16);
    expect_call(&r, 3, false, 16, true, -16);
    expect_call(&r, 4, true, 16, true, -16); /* a row applies from its own address on */
    expect_call(&r, 0x23, true, 16, true, -16);
    expect_call(&r, 0x24, false, 8, true, -16);
    expect_call(&r, FUNC_RANGE - 1, false, 8, true, -16);
    struct cfi_rule got;
    assert_int_equal(rule_at(&r, FUNC_RANGE, &got), -1);    /* past the function */
    assert_int_equal(rule_at(&r, (uintptr_t)-1, &got), -1); /* before it */
}

static void
test_remember_restore_and_restore(void **state)
{
    (void)state;
    struct record r;
    build(&r, 1, "zR", zr_data, 1,
          INSNS("\x44\x0e\x20\x86\x02" /* +4: CFA rsp+32, rbp saved */
                "\x0a"                 /* remember */
                "\x44\x0e\x08\xc6"     /* +8: CFA rsp+8, rbp restored to the CIE's */
                "\x41\x0b"             /* +9: restore_state: CFA rsp+32 again, rbp saved */
                "\x2e\x10\x00"));      /* GNU_args_size, nop */
    expect_call(&r, 4, false, 32, true, -16);
    expect_call(&r, 8, false, 8, false, 0);
    expect_call(&r, 9, false, 32, true, -16);
    struct record bad;
    build(&bad, 1, "zR", zr_data, 1, INSNS("\x0b")); /* restore_state with nothing remembered */
    struct cfi_rule got;
    assert_int_equal(rule_at(&bad, 0, &got), -1);
}

static void
test_long_forms(void **state)
{
    (void)state;
    struct record r;
    /* advance_loc1/2/4, offset_extended_sf, def_cfa_sf, def_cfa_offset_sf,
     * GNU_negative_offset_extended, restore_extended, same_value. */
    build(&r, 3, "zR", zr_data, 1,
          INSNS("\x02\x02\x11\x06\x7e"         /* +2: rbp at CFA+16 (sleb -2 * -8) */
                "\x03\x02\x00\x12\x06\x7e"     /* +4: CFA rbp+16 */
                "\x04\x02\x00\x00\x00\x13\x7c" /* +6: CFA rbp+32 */
                "\x41\x2f\x06\x03"             /* +7: rbp at CFA+24 */
                "\x41\x06\x06"                 /* +8: rbp restored: unchanged */
                "\x41\x86\x02\x08\x06"));      /* +9: saved, then same_value again */
    expect_call(&r, 2, false, 8, true, 16);
    expect_call(&r, 4, true, 16, true, 16);
    expect_call(&r, 6, true, 32, true, 16);
    expect_call(&r, 7, true, 32, true, 24);
    expect_call(&r, 8, true, 32, false, 0);
    expect_call(&r, 9, true, 32, false, 0);
}

static void
test_outermost_and_signal(void **state)
{
    (void)state;
    struct record r;
    build(&r, 1, "zR", zr_data, 1, INSNS("\x44\x07\x10")); /* +4: the return address undefined */
    expect_call(&r, 3, false, 8, false, 0);
    struct cfi_rule got;
    assert_int_equal(rule_at(&r, 4, &got), 0);
    assert_int_equal(got.frame, CFI_FRAME_OUTERMOST);
    /* glibc's __restore_rt: "zRS", its CFA by expression (the reader needs none of it). */
    build(&r, 1, "zRS", zr_data, 1, INSNS("\x0f\x03\x77\xa0\x01\x10\x06\x02\x77\x28"));
    assert_int_equal(rule_at(&r, 1, &got), 0);
    assert_int_equal(got.frame, CFI_FRAME_SIGNAL);
}

static void
test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *what, *insns;
        size_t len;
    } cases[] = {
        {"CFA by expression", INSNS("\x0f\x02\x77\x08")},
        {"CFA from r10", INSNS("\x0c\x0a\x00")},
        {"rbp in a register", INSNS("\x09\x06\x03")},
        {"rbp by expression", INSNS("\x10\x06\x02\x76\x00")},
        {"rbp as a value", INSNS("\x14\x06\x02")},
        {"the return address in a register", INSNS("\x09\x10\x03")},
        {"rsp given a rule", INSNS("\x87\x02")},
        {"window_save (not x86-64)", INSNS("\x2d")},
        {"an unknown instruction", INSNS("\x3f")},
        {"remember_state nested 9 deep", INSNS("\x0a\x0a\x0a\x0a\x0a\x0a\x0a\x0a\x0a")},
        {"a block past the record", INSNS("\x0f\x7f")},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct record r;
        build(&r, 1, "zR", zr_data, 1, cases[i].insns, cases[i].len);
        struct cfi_rule got;
        if (rule_at(&r, 8, &got) != -1)
            fail_msg("%s: accepted", cases[i].what);
    }
}

static void
test_augmentations_and_versions(void **state)
{
    (void)state;
    struct record r;
    struct cfi_rule got;
    /* gcc's C++ CIE: a personality (pcrel sdata4, indirect), an LSDA encoding, R. */
    static const uint8_t zplr[] = {0x9b, 1, 2, 3, 4, 0x1b, 0x1b};
    build(&r, 1, "zPLR", zplr, sizeof(zplr), INSNS("\x41\x0e\x10"));
    expect_call(&r, 1, false, 16, false, 0);
    build(&r, 4, "zR", zr_data, 1, INSNS("\x41\x0e\x10"));
    expect_call(&r, 1, false, 16, false, 0);
    build(&r, 2, "zR", zr_data, 1, INSNS("")); /* version 2 is no .eh_frame version */
    assert_int_equal(rule_at(&r, 0, &got), -1);
    build(&r, 1, "zRX", zr_data, 1, INSNS("")); /* a letter the reader does not know */
    assert_int_equal(rule_at(&r, 0, &got), -1);
    build(&r, 1, "eh", NULL, 0, INSNS("")); /* gcc's old augmentation */
    assert_int_equal(rule_at(&r, 0, &got), -1);
    static const uint8_t omit[] = {0xff};
    build(&r, 1, "zR", omit, 1, INSNS("")); /* FDE addresses "omitted" */
    assert_int_equal(rule_at(&r, 0, &got), -1);
}

static void
test_records_cut_short(void **state)
{
    (void)state;
    struct record r;
    struct cfi_rule got;
    build(&r, 1, "zR", zr_data, 1, INSNS("\x41\x0e\x10"));
    struct cfi_bases bases = {0, 0};
    uintptr_t lo = (uintptr_t)r.buf;
    /* Every end short of the FDE's: refused, nothing read past it (ASan would see). */
    for (size_t end = 0; end < r.len; end++)
        assert_int_equal(cfi_rule_at(r.buf + r.fde, lo, lo + end, &bases, r.func + 1, &got), -1);
    /* A CIE pointer before the section. */
    assert_int_equal(cfi_rule_at(r.buf + r.fde, lo + 4, lo + r.len, &bases, r.func + 1, &got), -1);
    /* A 64-bit length, and a CIE where the FDE is. */
    uint32_t ext = 0xffffffffu;
    memcpy(r.buf + r.fde, &ext, 4);
    assert_int_equal(rule_at(&r, 1, &got), -1);
    assert_int_equal(cfi_rule_at(r.buf, lo, lo + r.len, &bases, r.func + 1, &got), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prologue_and_epilogue),
        cmocka_unit_test(test_remember_restore_and_restore),
        cmocka_unit_test(test_long_forms),
        cmocka_unit_test(test_outermost_and_signal),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_augmentations_and_versions),
        cmocka_unit_test(test_records_cut_short),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
