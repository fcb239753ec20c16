/* unwind.c: the walk and its rule cache. A rule is packed into 64 bits and kept in an
 * open-addressing table of (pc, rule) slots: a reader that finds its pc reads the rule (0 while
 * the writer has not stored it yet: a miss); a writer claims an empty slot's pc by CAS, then
 * stores the rule. Like libunwind's fast trace (x86_64/Gtrace.c), only frames whose CFA is rsp
 * or rbp plus a constant are followed, plus signal frames; PyTorch's unwinder caches the same
 * kind of rule per address (torch/csrc/profiler/unwind). Code unloaded by dlclose and other
 * code mapped at the same addresses later must not be walked with the old rules (libunwind's
 * per-thread trace cache is never told, see stacks.c): unwind_forget_rules starts a new
 * generation. A slot's key is its pc with the generation in the bits above the pc's, and its rule
 * carries the generation too; a slot of an older generation is free to claim again, and a rule of
 * another generation than its key's (a writer of the slot's previous key still storing) reads as a
 * miss. A CFA must also lie above the stack pointer, within FRAME_SIZE_MAX of it, 8-byte aligned,
 * or libgcc walks the stack. */
#include "snapshot/unwind.h"

#include "snapshot/cfi.h"
#include "snapshot/loader_gate.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define RULE_BITS          16u
#define RULE_SLOTS         ((size_t)1 << RULE_BITS) /* 1 MiB of address space, touched as used */
#define RULE_PROBES        32u
#define FRAMES_MAX         512    /* frames of one walk (stacks.c asks for at most 329) */
#define SIGNALS_MAX        8u     /* signal frames in one walk */
#define CONTEXT_FRAMES_MAX 100000 /* frames unwind_caller_context steps through (it keeps none) */
#define FRAME_SIZE_MAX     ((uintptr_t)64 << 20) /* a CFA further above the stack pointer: libgcc's */

/* A packed rule: kind in bits 0-2, flags in 3-4, the generation in 5-21, rbp's offset from the
 * CFA in eighths in 22-34, the CFA's offset from rsp or rbp in 35-63 (both signed). 0 is no rule
 * (an empty or unfinished slot). */
enum rule_kind { RULE_NONE, RULE_CALL, RULE_SIGNAL, RULE_OUTERMOST, RULE_LIBGCC };
#define RULE_KIND      7u
#define RULE_CFA_RBP   (1u << 3)
#define RULE_RBP_SAVED (1u << 4)
#define GEN_SHIFT      5u
#define GEN_BITS       17u
#define GEN_MAX        ((1u << GEN_BITS) - 1u)
#define RBP_SHIFT      22u
#define RBP_BITS       13u
#define CFA_SHIFT      35u
#define CFA_BITS       29u
/* A key: the pc, below 2^47 as x86-64 user addresses are unless a program maps above on purpose
 * (those are not cached), and the generation above it. */
#define PC_BITS 47u
#define PC_MASK (((uintptr_t)1 << PC_BITS) - 1u)

struct rule_slot {
    _Atomic uintptr_t pc;
    _Atomic uint64_t rule;
};

/* libgcc's own lookup (unwind-dw2-fde.h; exported by libgcc_s.so.1 since GCC 3.0). */
struct dwarf_eh_bases {
    void *tbase;
    void *dbase;
    void *func;
};
typedef const void *(*find_fde_fn)(void *pc, struct dwarf_eh_bases *bases);

static find_fde_fn g_find_fde;
static unwind_backtrace_fn g_libc_backtrace = backtrace;
static struct rule_slot *g_slots;
static _Atomic uint64_t g_rules, g_fallbacks;
/* The rules' generation; past GEN_MAX forgettings nothing is cached: libgcc walks every stack. */
static _Atomic uint32_t g_generation;
static _Atomic bool g_generations_spent;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static atomic_bool g_ready; /* read without g_once by unwind_caller_context */

static void
unwind_load(void)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *own = libc == NULL ? NULL : dlsym(libc, "backtrace");
    if (own != NULL)
        memcpy(&g_libc_backtrace, &own, sizeof(g_libc_backtrace));
#ifndef __x86_64__
    return; /* the walk knows x86-64's registers and frames only: libgcc's everywhere else */
#endif
    void *lib = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
    void *sym = lib == NULL ? NULL : dlsym(lib, "_Unwind_Find_FDE");
    if (sym == NULL)
        return;
    void *slots = mmap(NULL, RULE_SLOTS * sizeof(struct rule_slot), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (slots == MAP_FAILED)
        return;
    memcpy(&g_find_fde, &sym, sizeof(g_find_fde));
    g_slots = slots;
    void *warm[4];
    (void)g_libc_backtrace(warm, 4);
    atomic_store_explicit(&g_ready, true, memory_order_release);
}

bool
unwind_init(void)
{
    pthread_once(&g_once, unwind_load);
    return atomic_load_explicit(&g_ready, memory_order_relaxed);
}

unwind_backtrace_fn
unwind_libc_backtrace(void)
{
    pthread_once(&g_once, unwind_load);
    return g_libc_backtrace;
}

void
unwind_get_stats(struct unwind_stats *out)
{
    out->rules = atomic_load_explicit(&g_rules, memory_order_relaxed);
    out->fallbacks = atomic_load_explicit(&g_fallbacks, memory_order_relaxed);
    out->generation = atomic_load_explicit(&g_generation, memory_order_relaxed);
}

void
unwind_forget_rules(void)
{
    uint32_t gen = atomic_load_explicit(&g_generation, memory_order_relaxed);
    do {
        if (gen >= GEN_MAX) {
            atomic_store_explicit(&g_generations_spent, true, memory_order_release);
            return;
        }
    } while (!atomic_compare_exchange_weak_explicit(&g_generation, &gen, gen + 1,
                                                    memory_order_release, memory_order_relaxed));
}

#ifdef __x86_64__
/* x86-64 rt_sigreturn as glibc's and musl's __restore_rt write it: mov $15, %rax; syscall. */
static const unsigned char sigreturn_code[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00,
                                               0x00, 0x00, 0x0f, 0x05};

/* Keyed by the pc alone, so that a pc's slots of older generations are the first it reclaims. */
static inline size_t
slot_of(uintptr_t pc)
{
    return (size_t)(((uint64_t)pc * 0x9e3779b97f4a7c15u) >> (64u - RULE_BITS));
}

static inline uintptr_t
key_of(uintptr_t pc, uint32_t gen)
{
    return pc | (uintptr_t)gen << PC_BITS;
}

#define GEN_FIELD ((uint64_t)GEN_MAX << GEN_SHIFT)

/* Every slot keyed by another pc, or under another generation, is passed over: slots are never
 * emptied, so a probe ends at the first empty one or after RULE_PROBES. */
static inline uint64_t
rule_find(uintptr_t pc, uint32_t gen)
{
    if (pc > PC_MASK)
        return RULE_NONE;
    uintptr_t key = key_of(pc, gen);
    size_t i = slot_of(pc);
    for (unsigned k = 0; k < RULE_PROBES; k++, i = (i + 1) & (RULE_SLOTS - 1)) {
        uintptr_t at = atomic_load_explicit(&g_slots[i].pc, memory_order_acquire);
        if (at == key) {
            uint64_t rule = atomic_load_explicit(&g_slots[i].rule, memory_order_acquire);
            return (rule & GEN_FIELD) == (uint64_t)gen << GEN_SHIFT ? rule : RULE_NONE;
        }
        if (at == 0)
            return RULE_NONE;
    }
    return RULE_NONE;
}

/* Claims an empty slot, or one of an older generation, for `pc`. Two threads storing one key's
 * rule store the same rule. A full neighbourhood leaves the rule uncached: it is read from its
 * FDE each time. */
static void
rule_insert(uintptr_t pc, uint32_t gen, uint64_t rule)
{
    if (pc > PC_MASK)
        return;
    uintptr_t key = key_of(pc, gen);
    size_t i = slot_of(pc);
    for (unsigned k = 0; k < RULE_PROBES; k++, i = (i + 1) & (RULE_SLOTS - 1)) {
        uintptr_t at = atomic_load_explicit(&g_slots[i].pc, memory_order_acquire);
        for (;;) {
            if (at == key) {
                atomic_store_explicit(&g_slots[i].rule, rule, memory_order_release);
                return;
            }
            if (at != 0 && (at >> PC_BITS) >= gen)
                break; /* another pc's, of this generation (or a later one: this walk is old) */
            if (atomic_compare_exchange_weak_explicit(&g_slots[i].pc, &at, key,
                                                      memory_order_acq_rel, memory_order_acquire)) {
                atomic_store_explicit(&g_slots[i].rule, rule, memory_order_release);
                return;
            }
        }
    }
}

/* A signed field ending at bit `shift + bits`, by two shifts: the conversion to int64_t keeps the
 * bits and >> is arithmetic on int64_t (GCC's and Clang's documented behaviour, as C11 leaves
 * both to the implementation); the rule's last field ends at bit 63. */
static inline int64_t
field_signed(uint64_t rule, unsigned shift, unsigned bits)
{
    return (int64_t)(rule << (64u - shift - bits)) >> (64u - bits);
}
_Static_assert(CFA_SHIFT + CFA_BITS == 64u, "the CFA's offset is the rule's top field");
_Static_assert((-8 >> 1) == -4, "arithmetic right shift of negative values");

static uint64_t
rule_kind_of(const struct cfi_rule *r, uintptr_t ip)
{
    switch (r->frame) {
    case CFI_FRAME_OUTERMOST:
        return RULE_OUTERMOST;
    case CFI_FRAME_SIGNAL:
        /* The augmentation says "signal frame"; the code says which: rt_sigreturn. */
        return ip >= r->begin && r->end - ip >= sizeof(sigreturn_code) &&
                       memcmp((const void *)ip, sigreturn_code, sizeof(sigreturn_code)) == 0
                   ? RULE_SIGNAL
                   : RULE_LIBGCC;
    case CFI_FRAME_CALL:
        break;
    }
    /* x86-64's call pushes the return address just below the caller's rsp (the CFA). */
    const int64_t cfa_lim = (int64_t)1 << (CFA_BITS - 1), rbp_lim = (int64_t)8 << (RBP_BITS - 1);
    if (r->ra_off != -8 || r->cfa_off < -cfa_lim || r->cfa_off >= cfa_lim ||
        r->rbp_off < -rbp_lim || r->rbp_off >= rbp_lim || r->rbp_off % 8 != 0)
        return RULE_LIBGCC;
    return RULE_CALL | (r->cfa_rbp ? RULE_CFA_RBP : 0u) | (r->rbp_saved ? RULE_RBP_SAVED : 0u) |
           ((uint64_t)(r->rbp_off / 8) & ((1u << RBP_BITS) - 1u)) << RBP_SHIFT |
           ((uint64_t)r->cfa_off & (((uint64_t)1 << CFA_BITS) - 1u)) << CFA_SHIFT;
}

/* The rule at `pc` (ip, or ip - 1 for a return address), read from its FDE and cached under
 * generation `gen`. A pc without an FDE is not cached: code registered later (a JIT) may get
 * one. */
static uint64_t
rule_fill(uintptr_t pc, uintptr_t ip, uint32_t gen)
{
    struct dwarf_eh_bases b;
    loader_gate_enter(); /* libgcc may ask dl_iterate_phdr (it does where glibc is older than 2.35)
                          */
    const void *fde = g_find_fde((void *)pc, &b);
    loader_gate_leave();
    if (fde == NULL)
        return RULE_LIBGCC;
    struct cfi_bases bases = {(uintptr_t)b.tbase, (uintptr_t)b.dbase};
    struct cfi_rule r;
    uint64_t rule =
        cfi_rule_at(fde, 0, UINTPTR_MAX, &bases, pc, &r) == 0 ? rule_kind_of(&r, ip) : RULE_LIBGCC;
    rule |= (uint64_t)gen << GEN_SHIFT;
    atomic_fetch_add_explicit(&g_rules, 1, memory_order_relaxed);
    rule_insert(pc, gen, rule);
    return rule;
}

/* How a walk ended: at the thread's outermost frame (rather than at `max` frames or a frame it
 * could not step), and how many signal frames it crossed before it ended. */
struct walk_end {
    bool outermost;
    unsigned signals;
};

/* Steps from the frame at (ip, sp, bp), where ip is the next instruction to run, recording each
 * caller's return address in buf (buf NULL: counting only): -1 when a frame needs libgcc. Reads
 * other frames' saved registers by design, so no sanitizer looks at those loads. */
__attribute__((no_sanitize("address"))) static int
walk(uintptr_t ip, uintptr_t sp, uintptr_t bp, void **buf, int max, struct walk_end *end)
{
    if (atomic_load_explicit(&g_generations_spent, memory_order_acquire))
        return -1;
    /* One generation for the whole walk: a rule read under an older one describes code that was
     * mapped when this walk began. */
    uint32_t gen = atomic_load_explicit(&g_generation, memory_order_acquire);
    int n = 0;
    bool exact = true; /* ip is where the frame resumes, not a return address */
    unsigned signals = 0;
    while (n < max) {
        uintptr_t pc = exact ? ip : ip - 1; /* a return address may follow a noreturn call */
        uint64_t rule = rule_find(pc, gen);
        if (rule == RULE_NONE)
            rule = rule_fill(pc, ip, gen);
        switch (rule & RULE_KIND) {
        case RULE_CALL: {
            uintptr_t cfa = ((rule & RULE_CFA_RBP) ? bp : sp) +
                            (uintptr_t)field_signed(rule, CFA_SHIFT, CFA_BITS);
            if (cfa <= sp || cfa - sp > FRAME_SIZE_MAX || (cfa & 7u) != 0)
                return -1;
            if (rule & RULE_RBP_SAVED)
                bp = *(const uintptr_t *)(cfa +
                                          (uintptr_t)(field_signed(rule, RBP_SHIFT, RBP_BITS) * 8));
            ip = *(const uintptr_t *)(cfa - 8);
            sp = cfa;
            exact = false;
            break;
        }
        case RULE_SIGNAL: {
            /* The handler returned into __restore_rt with rsp at the kernel's ucontext. */
            end->signals = ++signals;
            if (exact || signals > SIGNALS_MAX || (sp & 7u) != 0)
                return -1;
            const ucontext_t *uc = (const ucontext_t *)sp;
            ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
            sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
            bp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
            exact = true;
            break;
        }
        case RULE_OUTERMOST:
            end->outermost = true;
            return n;
        default:
            return -1;
        }
        if (ip == 0) { /* glibc's backtrace drops the NULL above _start too */
            end->outermost = true;
            return n;
        }
        if (buf != NULL)
            buf[n] = (void *)ip;
        n++;
    }
    return n;
}

/* walk from the frame this is inlined into: its registers, read together; rbp first, in case the
 * compiler picked rbp for another output. The rule at ip describes this very state. */
__attribute__((always_inline)) static inline int
walk_from_here(void **buf, int max, struct walk_end *end)
{
    uintptr_t ip, sp, bp;
    __asm__ volatile("mov %%rbp, %2\n\t"
                     "mov %%rsp, %1\n\t"
                     "lea 0(%%rip), %0"
                     : "=r"(ip), "=r"(sp), "=r"(bp));
    return walk(ip, sp, bp, buf, max, end);
}

#endif

__attribute__((noinline)) int
unwind_backtrace(void **buf, int max)
{
    if (max <= 0)
        return 0;
    if (max > FRAMES_MAX)
        max = FRAMES_MAX;
    int n = -1;
#ifdef __x86_64__
    struct walk_end end = {false, 0};
    n = walk_from_here(buf, max, &end);
#endif
    if (n >= 0)
        return n;
    /* libgcc's walk: its first frame is this one, dropped. */
    void *all[FRAMES_MAX + 1];
    loader_gate_enter();
    n = g_libc_backtrace(all, max + 1);
    loader_gate_leave();
    atomic_fetch_add_explicit(&g_fallbacks, 1, memory_order_relaxed);
    if (n <= 1)
        return 0;
    memcpy(buf, all + 1, (size_t)(n - 1) * sizeof(*buf));
    return n - 1;
}

__attribute__((noinline)) enum unwind_context
unwind_caller_context(void)
{
#ifdef __x86_64__
    if (!atomic_load_explicit(&g_ready, memory_order_acquire))
        return UNWIND_CONTEXT_UNKNOWN;
    struct walk_end end = {false, 0};
    /* No buffer: this may run on a signal handler's small alternate stack. */
    int n = walk_from_here(NULL, CONTEXT_FRAMES_MAX, &end);
    if (end.signals > 0)
        return UNWIND_CONTEXT_SIGNAL_HANDLER;
    return n >= 0 && end.outermost ? UNWIND_CONTEXT_PLAIN : UNWIND_CONTEXT_UNKNOWN;
#else
    return UNWIND_CONTEXT_UNKNOWN;
#endif
}
