/* test_text_escape.c: the one escaping rule for text from outside (snapshot/text_escape.h):
 * undecodable bytes as \xHH in both targets, control characters only on a terminal, valid UTF-8
 * kept, and output cut only between whole pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "snapshot/text_escape.h"

static void
expect_escape(const char *in, size_t len, enum text_escape_target target, const char *want)
{
    char out[256];
    size_t need = text_escape(in, len, target, out, sizeof(out));
    assert_string_equal(out, want);
    assert_int_equal(need, strlen(want));
    assert_int_equal(text_escape_is_clean(in, len, target),
                     strcmp(in, want) == 0 && strlen(want) == len);
}

static void
test_utf8_target(void **state)
{
    (void)state;
    expect_escape("plain ascii", 11, TEXT_ESCAPE_UTF8, "plain ascii");
    expect_escape("r\xe9sum\xe9.pickle", 13, TEXT_ESCAPE_UTF8, "r\\xe9sum\\xe9.pickle");
    expect_escape("caf\xc3\xa9 \xf0\x9f\x98\x80", 10, TEXT_ESCAPE_UTF8,
                  "caf\xc3\xa9 \xf0\x9f\x98\x80");
    /* Control characters stay (a JSON or pickle writer escapes them its own way), NUL does not. */
    expect_escape("a\tb\x1b]0;x\x07", 9, TEXT_ESCAPE_UTF8, "a\tb\x1b]0;x\x07");
    expect_escape("a\0b", 3, TEXT_ESCAPE_UTF8, "a\\x00b");
    /* Overlong, surrogate, past U+10FFFF, truncated: each byte on its own. */
    expect_escape("\xc0\xaf", 2, TEXT_ESCAPE_UTF8, "\\xc0\\xaf");
    expect_escape("\xed\xa0\x80", 3, TEXT_ESCAPE_UTF8, "\\xed\\xa0\\x80");
    expect_escape("\xf4\x90\x80\x80", 4, TEXT_ESCAPE_UTF8, "\\xf4\\x90\\x80\\x80");
    expect_escape("ok\xe2\x82", 4, TEXT_ESCAPE_UTF8, "ok\\xe2\\x82");
    /* C1 controls are valid UTF-8: kept for JSON. */
    expect_escape("\xc2\x9b", 2, TEXT_ESCAPE_UTF8, "\xc2\x9b");
}

static void
test_terminal_target(void **state)
{
    (void)state;
    expect_escape("\x1b]0;owned\x07", 10, TEXT_ESCAPE_TERMINAL, "\\x1b]0;owned\\x07");
    expect_escape("\x1b[2J", 4, TEXT_ESCAPE_TERMINAL, "\\x1b[2J");
    expect_escape("line\nbreak\r\x7f", 12, TEXT_ESCAPE_TERMINAL, "line\\x0abreak\\x0d\\x7f");
    expect_escape("\xc2\x9b"
                  "31m",
                  5, TEXT_ESCAPE_TERMINAL, "\\u009b31m");
    expect_escape("\xc2\xa0nbsp", 6, TEXT_ESCAPE_TERMINAL, "\xc2\xa0nbsp");
    expect_escape("r\xe9sum\xe9", 6, TEXT_ESCAPE_TERMINAL, "r\\xe9sum\\xe9");
    expect_escape("\xe6\x97\xa5\xe6\x9c\xac", 6, TEXT_ESCAPE_TERMINAL, "\xe6\x97\xa5\xe6\x9c\xac");
}

/* A short buffer keeps whole pieces only, and the return says how much the whole text needs. */
static void
test_cut(void **state)
{
    (void)state;
    char out[6];
    size_t need = text_escape("ab\xffz", 4, TEXT_ESCAPE_UTF8, out, sizeof(out));
    assert_int_equal(need, 7);
    assert_string_equal(out, "ab"); /* "ab\xff" would need 6 bytes and the NUL */
    need = text_escape("\xc3\xa9\xc3\xa9\xc3\xa9", 6, TEXT_ESCAPE_UTF8, out, sizeof(out));
    assert_int_equal(need, 6);
    assert_string_equal(out, "\xc3\xa9\xc3\xa9"); /* never half a sequence */
    assert_int_equal(text_escape("x", 1, TEXT_ESCAPE_UTF8, NULL, 0), 1);
    char *dup = text_escape_dup("\x01\xff", 2, TEXT_ESCAPE_TERMINAL);
    assert_non_null(dup);
    assert_string_equal(dup, "\\x01\\xff");
    free(dup);
}

/* Every byte string of length 1 and 2 escapes into valid UTF-8 with no control character left
 * on the terminal target. */
static void
test_exhaustive_pairs(void **state)
{
    (void)state;
    for (unsigned a = 0; a < 256; a++) {
        for (unsigned b = 0; b < 256; b++) {
            char in[2] = {(char)a, (char)b};
            char out[32];
            for (int t = 0; t < 2; t++) {
                enum text_escape_target target = t ? TEXT_ESCAPE_TERMINAL : TEXT_ESCAPE_UTF8;
                size_t need = text_escape(in, 2, target, out, sizeof(out));
                assert_true(need < sizeof(out));
                assert_int_equal(strlen(out), need);
                const unsigned char *u = (const unsigned char *)out;
                for (size_t i = 0; i < need;) {
                    size_t n = text_escape_utf8_len(u + i, need - i);
                    assert_true(n > 0);
                    if (t == 1)
                        assert_false(u[i] < 0x20 || u[i] == 0x7f ||
                                     (u[i] == 0xc2 && n == 2 && u[i + 1] < 0xa0));
                    i += n;
                }
                assert_true(text_escape_is_clean(out, need, target));
            }
        }
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_target),
        cmocka_unit_test(test_terminal_target),
        cmocka_unit_test(test_cut),
        cmocka_unit_test(test_exhaustive_pairs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
