/* pickle_reader.c: the pickle VM for snapshot files. Opcode meanings follow CPython's
 * Lib/pickle.py; only the data opcodes of protocols 2-5 are accepted (no globals, no objects). */
#include "snapshot/pickle_reader.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator/cuprof_errors.h"
#include "snapshot/snapshot_arena.h"
#include "snapshot/snapshot_model.h"

struct vm {
    const unsigned char *p, *start, *end;
    struct snapshot_arena *tree;
    struct snapshot *strings;
    struct sval *stack;
    size_t sp, stack_cap;
    size_t marks[PICKLE_MAX_MARKS];
    int mark_count;
    struct sval *memo;
    size_t memo_cap;
    unsigned char *memo_set; /* 1 where memo[i] holds a value */
    size_t memo_len;         /* MEMOIZE's next index (len(memo) in CPython) */
    char *err;
    size_t err_len;
};

static int
fail(struct vm *vm, int code, const char *fmt, ...)
{
    if (vm->err_len > 0) {
        int n = snprintf(vm->err, vm->err_len, "byte %zu: ", (size_t)(vm->p - vm->start));
        if (n >= 0 && (size_t)n < vm->err_len) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(vm->err + n, vm->err_len - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return code;
}

static int
need(struct vm *vm, size_t n, const char *what)
{
    if ((size_t)(vm->end - vm->p) < n)
        return fail(vm, -CUPROF_EFORMAT, "truncated pickle (%s needs %zu more bytes)", what, n);
    return 0;
}

static uint64_t
le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int
push(struct vm *vm, struct sval v)
{
    if (vm->sp == vm->stack_cap) {
        size_t cap = vm->stack_cap ? vm->stack_cap * 2 : 256;
        struct sval *s = realloc(vm->stack, cap * sizeof(*s));
        if (s == NULL)
            return fail(vm, -CUPROF_EHOSTMEM, "out of memory");
        vm->stack = s;
        vm->stack_cap = cap;
    }
    vm->stack[vm->sp++] = v;
    return 0;
}

/* Items above the innermost MARK; the MARK is removed. */
static int
pop_mark(struct vm *vm, size_t *first)
{
    if (vm->mark_count == 0)
        return fail(vm, -CUPROF_EFORMAT, "opcode needs a MARK but none is open");
    *first = vm->marks[--vm->mark_count];
    return 0;
}

static int
new_seq(struct vm *vm, uint8_t type, const struct sval *items, size_t n, struct sval *out)
{
    struct sval_seq *seq = sval_seq_new(vm->tree);
    if (seq == NULL || sval_seq_append(vm->tree, seq, items, n, type == SVAL_DICT) != 0)
        return fail(vm, -CUPROF_EHOSTMEM, "out of memory");
    *out = (struct sval){.type = type, .u.seq = seq};
    return 0;
}

static int
string(struct vm *vm, uint64_t n)
{
    if ((uint64_t)(vm->end - vm->p) < n)
        return fail(vm, -CUPROF_EFORMAT, "truncated pickle (string of %llu bytes)",
                    (unsigned long long)n);
    const char *s = snapshot_intern_n(vm->strings, (const char *)vm->p, (size_t)n);
    if (s == NULL)
        return fail(vm, -CUPROF_EHOSTMEM, "out of memory");
    vm->p += n;
    return push(vm, (struct sval){.type = SVAL_STR, .u.s = s});
}

static int
memo_store(struct vm *vm, uint64_t index)
{
    if (vm->sp == 0)
        return fail(vm, -CUPROF_EFORMAT, "memo store with an empty stack");
    /* A file cannot define more memo entries than it has bytes: bounds hostile indices. */
    if (index >= (uint64_t)(vm->end - vm->start))
        return fail(vm, -CUPROF_EFORMAT, "memo index %llu out of range", (unsigned long long)index);
    if (index >= vm->memo_cap) {
        size_t cap = vm->memo_cap ? vm->memo_cap : 256;
        while (cap <= index)
            cap *= 2;
        struct sval *m = realloc(vm->memo, cap * sizeof(*m));
        if (m == NULL)
            return fail(vm, -CUPROF_EHOSTMEM, "out of memory");
        vm->memo = m;
        unsigned char *set = realloc(vm->memo_set, cap);
        if (set == NULL)
            return fail(vm, -CUPROF_EHOSTMEM, "out of memory");
        memset(set + vm->memo_cap, 0, cap - vm->memo_cap);
        vm->memo_set = set;
        vm->memo_cap = cap;
    }
    vm->memo[index] = vm->stack[vm->sp - 1];
    vm->memo_set[index] = 1;
    return 0;
}

static int
memo_fetch(struct vm *vm, uint64_t index)
{
    if (index >= vm->memo_cap || !vm->memo_set[index])
        return fail(vm, -CUPROF_EFORMAT, "memo index %llu was never stored",
                    (unsigned long long)index);
    return push(vm, vm->memo[index]);
}

/* APPEND(S)/SETITEM(S): add stack[first..sp) to the container just below them. */
static int
add_items(struct vm *vm, size_t first, bool dict)
{
    if (first == 0)
        return fail(vm, -CUPROF_EFORMAT, "%s without a container", dict ? "SETITEMS" : "APPENDS");
    struct sval *target = &vm->stack[first - 1];
    size_t n = vm->sp - first;
    if (target->type != (dict ? SVAL_DICT : SVAL_LIST))
        return fail(vm, -CUPROF_EFORMAT, "%s on a %s", dict ? "SETITEMS" : "APPENDS",
                    sval_type_name(target));
    if (dict && n % 2 != 0)
        return fail(vm, -CUPROF_EFORMAT, "SETITEMS with an odd number of items");
    if (sval_seq_append(vm->tree, target->u.seq, vm->stack + first, n, dict) != 0)
        return fail(vm, -CUPROF_EHOSTMEM, "out of memory");
    vm->sp = first;
    return 0;
}

/* Decimal text of the two's-complement little-endian integer p[0..n) (n <= BIG_TEXT_BYTES). */
#define BIG_TEXT_BYTES 48
static void
big_text(const unsigned char *p, size_t n, char *out, size_t out_len)
{
    unsigned char mag[BIG_TEXT_BYTES];
    bool neg = (p[n - 1] & 0x80u) != 0;
    unsigned carry = 1;
    for (size_t i = 0; i < n; i++) { /* magnitude: negate if negative */
        unsigned b = neg ? (unsigned)(uint8_t)~p[i] + carry : p[i];
        mag[i] = (unsigned char)b;
        carry = neg ? b >> 8 : 0;
    }
    char digits[BIG_TEXT_BYTES * 3 + 2];
    size_t nd = 0, top = n;
    while (top > 0) { /* repeated division by 10, most significant byte first */
        unsigned rem = 0;
        for (size_t i = top; i-- > 0;) {
            unsigned cur = (rem << 8) | mag[i];
            mag[i] = (unsigned char)(cur / 10);
            rem = cur % 10;
        }
        digits[nd++] = (char)('0' + rem);
        while (top > 0 && mag[top - 1] == 0)
            top--;
    }
    if (nd == 0)
        digits[nd++] = '0';
    size_t o = 0;
    if (neg && o + 1 < out_len)
        out[o++] = '-';
    while (nd > 0 && o + 1 < out_len)
        out[o++] = digits[--nd];
    out[o] = '\0';
}

/* LONG1/LONG4: a Python int of any size, little-endian two's complement (CPython's
 * encode_long). Values that fit int64 are SVAL_INT, [2^63, 2^64) SVAL_UINT (PyTorch writes an
 * unknown size_t line as 2^64-1), anything wider SVAL_BIGINT: readable, and refused later only by
 * the field that holds it. */
static int
long_value(struct vm *vm, uint64_t n)
{
    int rc = need(vm, n > SIZE_MAX ? SIZE_MAX : (size_t)n, "LONG");
    if (rc != 0)
        return rc;
    const unsigned char *p = vm->p;
    vm->p += n;
    if (n == 0)
        return push(vm, (struct sval){.type = SVAL_INT, .u.i = 0});
    /* Drop sign-extension bytes CPython would not have written (a hand-made file might). */
    size_t len = (size_t)n;
    while (len > 1 && ((p[len - 1] == 0x00 && !(p[len - 2] & 0x80u)) ||
                       (p[len - 1] == 0xff && (p[len - 2] & 0x80u))))
        len--;
    if (len <= 8) {
        uint64_t u = le(p, len);
        if (len < 8 && (p[len - 1] & 0x80u))
            u |= ~(uint64_t)0 << (8 * len); /* sign-extend */
        /* Two's complement to int64 without an implementation-defined conversion. */
        int64_t i = u <= INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
        return push(vm, (struct sval){.type = SVAL_INT, .u.i = i});
    }
    if (len == 9 && p[8] == 0x00)
        return push(vm, (struct sval){.type = SVAL_UINT, .u.u = le(p, 8)});
    char text[BIG_TEXT_BYTES * 3 + 32];
    if (len <= BIG_TEXT_BYTES)
        big_text(p, len, text, sizeof(text));
    else
        snprintf(text, sizeof(text), "a %s integer of %zu bytes",
                 (p[len - 1] & 0x80u) ? "negative" : "positive", len);
    const char *s = snapshot_intern(vm->strings, text);
    if (s == NULL)
        return fail(vm, -CUPROF_EHOSTMEM, "out of memory");
    return push(vm, (struct sval){.type = SVAL_BIGINT, .u.s = s});
}

static int
step(struct vm *vm, unsigned char op, bool *stop)
{
    int rc = 0;
    size_t first = 0;
    struct sval v;
    switch (op) {
    case 0x80: /* PROTO */
        if ((rc = need(vm, 1, "PROTO")) != 0)
            return rc;
        if (vm->p[0] < 2 || vm->p[0] > 5)
            return fail(vm, -CUPROF_EFORMAT, "unsupported pickle protocol %u", vm->p[0]);
        vm->p++;
        return 0;
    case 0x95: /* FRAME: a length hint only */
        if ((rc = need(vm, 8, "FRAME")) != 0)
            return rc;
        vm->p += 8;
        return 0;
    case '.': /* STOP */
        if (vm->sp == 0)
            return fail(vm, -CUPROF_EFORMAT, "STOP with an empty stack");
        *stop = true;
        return 0;
    case '(':
        if (vm->mark_count == PICKLE_MAX_MARKS)
            return fail(vm, -CUPROF_EFORMAT, "nesting deeper than %d levels", PICKLE_MAX_MARKS);
        vm->marks[vm->mark_count++] = vm->sp;
        return 0;
    case '}':
    case ']':
    case ')':
        if ((rc = new_seq(vm,
                          op == '}'   ? SVAL_DICT
                          : op == ']' ? SVAL_LIST
                                      : SVAL_TUPLE,
                          NULL, 0, &v)) != 0)
            return rc;
        return push(vm, v);
    case 'a': /* APPEND */
    case 's': /* SETITEM */
        if (vm->sp < (op == 's' ? 3u : 2u))
            return fail(vm, -CUPROF_EFORMAT, "stack underflow");
        return add_items(vm, vm->sp - (op == 's' ? 2 : 1), op == 's');
    case 'e': /* APPENDS */
    case 'u': /* SETITEMS */
        if ((rc = pop_mark(vm, &first)) != 0)
            return rc;
        return add_items(vm, first, op == 'u');
    case 'd': /* DICT */
    case 'l': /* LIST */
    case 't': /* TUPLE */
        if ((rc = pop_mark(vm, &first)) != 0)
            return rc;
        if (op == 'd' && (vm->sp - first) % 2 != 0)
            return fail(vm, -CUPROF_EFORMAT, "DICT with an odd number of items");
        if ((rc = new_seq(vm,
                          op == 'd'   ? SVAL_DICT
                          : op == 'l' ? SVAL_LIST
                                      : SVAL_TUPLE,
                          vm->sp > first ? vm->stack + first : NULL, vm->sp - first, &v)) != 0)
            return rc;
        vm->sp = first;
        return push(vm, v);
    case 0x85: /* TUPLE1..3 */
    case 0x86:
    case 0x87: {
        size_t n = (size_t)(op - 0x84);
        if (vm->sp < n)
            return fail(vm, -CUPROF_EFORMAT, "stack underflow");
        if ((rc = new_seq(vm, SVAL_TUPLE, vm->stack + vm->sp - n, n, &v)) != 0)
            return rc;
        vm->sp -= n;
        return push(vm, v);
    }
    case 0x8c: /* SHORT_BINUNICODE */
        if ((rc = need(vm, 1, "SHORT_BINUNICODE")) != 0)
            return rc;
        return string(vm, *vm->p++);
    case 'X': /* BINUNICODE */
        if ((rc = need(vm, 4, "BINUNICODE")) != 0)
            return rc;
        vm->p += 4;
        return string(vm, le(vm->p - 4, 4));
    case 0x8d: /* BINUNICODE8 */
        if ((rc = need(vm, 8, "BINUNICODE8")) != 0)
            return rc;
        vm->p += 8;
        return string(vm, le(vm->p - 8, 8));
    case 'K': /* BININT1 */
        if ((rc = need(vm, 1, "BININT1")) != 0)
            return rc;
        return push(vm, (struct sval){.type = SVAL_INT, .u.i = *vm->p++});
    case 'M': /* BININT2 */
        if ((rc = need(vm, 2, "BININT2")) != 0)
            return rc;
        vm->p += 2;
        return push(vm, (struct sval){.type = SVAL_INT, .u.i = (int64_t)le(vm->p - 2, 2)});
    case 'J': /* BININT: signed 32-bit */
        if ((rc = need(vm, 4, "BININT")) != 0)
            return rc;
        vm->p += 4;
        return push(vm,
                    (struct sval){.type = SVAL_INT, .u.i = (int32_t)(uint32_t)le(vm->p - 4, 4)});
    case 0x8a: /* LONG1 */
        if ((rc = need(vm, 1, "LONG1")) != 0)
            return rc;
        return long_value(vm, *vm->p++);
    case 0x8b: /* LONG4 */
        if ((rc = need(vm, 4, "LONG4")) != 0)
            return rc;
        vm->p += 4;
        return long_value(vm, le(vm->p - 4, 4));
    case 'G': { /* BINFLOAT: big-endian double */
        if ((rc = need(vm, 8, "BINFLOAT")) != 0)
            return rc;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++)
            u = (u << 8) | vm->p[i];
        vm->p += 8;
        v.type = SVAL_FLOAT;
        memcpy(&v.u.f, &u, sizeof(u));
        return push(vm, v);
    }
    case 'N':
        return push(vm, (struct sval){.type = SVAL_NONE});
    case 0x88:
    case 0x89:
        return push(vm, (struct sval){.type = SVAL_BOOL, .u.b = op == 0x88});
    case 0x94: /* MEMOIZE */
        if ((rc = memo_store(vm, vm->memo_len)) != 0)
            return rc;
        vm->memo_len++;
        return 0;
    case 'q': /* BINPUT */
        if ((rc = need(vm, 1, "BINPUT")) != 0)
            return rc;
        return memo_store(vm, *vm->p++);
    case 'r': /* LONG_BINPUT */
        if ((rc = need(vm, 4, "LONG_BINPUT")) != 0)
            return rc;
        vm->p += 4;
        return memo_store(vm, le(vm->p - 4, 4));
    case 'h': /* BINGET */
        if ((rc = need(vm, 1, "BINGET")) != 0)
            return rc;
        return memo_fetch(vm, *vm->p++);
    case 'j': /* LONG_BINGET */
        if ((rc = need(vm, 4, "LONG_BINGET")) != 0)
            return rc;
        vm->p += 4;
        return memo_fetch(vm, le(vm->p - 4, 4));
    default:
        vm->p--;
        return fail(vm, -CUPROF_EFORMAT,
                    "unsupported pickle opcode 0x%02x (only plain data is read: dicts, lists, "
                    "tuples, strings, numbers)",
                    op);
    }
}

int
pickle_read(const unsigned char *data, size_t len, struct snapshot_arena *tree,
            struct snapshot *strings, struct sval *out, char *err, size_t err_len)
{
    struct vm vm = {.p = data,
                    .start = data,
                    .end = data + len,
                    .tree = tree,
                    .strings = strings,
                    .err = err,
                    .err_len = err_len};
    int rc = 0;
    bool stop = false;
    if (len == 0 || data[0] != 0x80)
        rc = fail(&vm, -CUPROF_EFORMAT, "not a pickle of protocol 2 or later (no PROTO opcode)");
    while (rc == 0 && !stop) {
        if (vm.p == vm.end) {
            rc = fail(&vm, -CUPROF_EFORMAT, "truncated pickle (no STOP opcode)");
            break;
        }
        unsigned char op = *vm.p++;
        rc = step(&vm, op, &stop);
    }
    if (rc == 0)
        *out = vm.stack[vm.sp - 1];
    free(vm.stack);
    free(vm.memo);
    free(vm.memo_set);
    return rc;
}
