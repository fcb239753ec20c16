/* test_frame_filter.c: which frames reports hide (a table of frames as real stacks hold them,
 * from cuprof, NVIDIA's libraries, PyTorch and CPython), and the rewrite of a snapshot's stacks:
 * stacks that differ only in hidden frames become one, a stack of nothing but machinery stays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli_util.h"
#include "cli/frame_entry.h"
#include "cli/frame_filter.h"
#include "snapshot/snapshot_model.h"

struct frame_case {
    const char *name;
    const char *filename;
    bool hidden;             /* in a stack without Python frames */
    bool hidden_with_python; /* in a stack with Python frames */
};

static const struct frame_case cases[] = {
    /* The user's frames: C, C++, Python (whatever a Python function is called). */
    {"main", "../tests/apps/train_loop.c", false, false},
    {"train_step", "/home/u/train.py", false, false},
    {"_PyEval_helper", "/home/u/tools.py", false, false},
    {"Model::forward()", "/home/u/model.cpp", false, false},
    {"train_start", "/home/u/loop.c", false, false}, /* memory_viz's "_start" would hide it */
    {"cudnn_setup", "/home/u/a.c", false, false},
    {"cuda", "/home/u/a.c", false, false},
    {"cubic", "/home/u/a.c", false, false},
    {"at::native::add_out", "/opt/pytorch/aten/src/ATen/native/BinaryOps.cpp", false, false},
    /* cuprof, the CUDA runtime and driver, the simulated ones. */
    {"cuprof_cuMemAlloc", "/usr/lib/libcuprof.so", true, true},
    {"libcuda.so.1+0x1234", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", true, true},
    {"??", "/usr/local/cuda/lib64/libcudart.so.13", true, true},
    {"rt_malloc", "../tests/sim/runtime/rt_memory.c", true, true},
    {"cudaMalloc", "/home/u/app", true, true}, /* nvcc's static runtime */
    {"cuMemAlloc_v2", "/home/u/app", true, true},
    {"cudart::cudaApiMalloc(void**, unsigned long)", "/home/u/app", true, true},
    {"libcudart_static_4d8b33a106dceb3c07a56e26de61f545ff6e5ec8", "/home/u/app", true, true},
    /* PyTorch's unwinder, allocator, factories, dispatcher (memory_viz's list and more). */
    {"torch::unwind::unwind()", "/opt/pytorch/torch/csrc/profiler/unwind/unwind.cpp", true, true},
    {"torch::CapturedTraceback::gather(bool, bool, bool)", "", true, true},
    {"gather_with_cpp", "", true, true},
    {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, "
     "unsigned long, CUstream_st*)",
     "", true, true},
    {"DeviceCachingAllocator::malloc", "", true, true},
    {"at::detail::empty_cuda(c10::ArrayRef<long>)", "", true, true},
    {"at::native::empty_cuda(c10::ArrayRef<long>)", "", true, true},
    {"at::empty(c10::ArrayRef<long>)", "", true, true},
    {"at::empty_strided(c10::ArrayRef<long>)", "", true, true},
    {"at::_ops::empty_memory_format::call()", "", true, true},
    {"c10::impl::wrap_kernel_functor_unboxed_<F>::call()", "", true, true},
    {"f", "/opt/pytorch/aten/src/ATen/core/boxing/impl/boxing.h", true, true},
    {"wrapper", "/opt/pytorch/build/aten/src/ATen/RegisterCUDA.cpp", true, true},
    {"torch::autograd::THPVariable_empty(_object*, _object*, _object*)", "", true, true},
    /* libc's start-up. */
    {"_start", "/home/u/app", true, true},
    {"__libc_start_main", "/lib/x86_64-linux-gnu/libc.so.6", true, true},
    {"__libc_start_main_impl", "../csu/libc-start.c", true, true},
    {"__libc_start_call_main", "../sysdeps/nptl/libc_start_call_main.h", true, true},
    {"start_thread", "./nptl/pthread_create.c", true, true},
    {"__clone3", "../sysdeps/unix/sysv/linux/x86_64/clone3.S", true, true},
    /* The interpreter: hidden only where Python frames stand for it. */
    {"main", "/usr/bin/python3.12", false, true},
    {"main", "/usr/bin/python3", false, true},
    {"main", "/usr/local/bin/python3.13t", false, true},
    {"main", "/usr/bin/python3-config", false, false},
    {"f", "/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0", false, true},
    {"f", "Python/ceval.c", false, true},
    {"f", "/build/cpython/Objects/call.c", false, true},
    {"f", "./Modules/main.c", false, true},
    {"f", "./Include/internal/pycore_ceval.h", false, true},
    {"f", "/home/u/MyObjects/x.c", false, false},
    {"ffi_call_unix64", "/usr/lib/x86_64-linux-gnu/libffi.so.8", false, true},
    {"f", "/usr/lib/python3.12/lib-dynload/_ctypes.cpython-312-x86_64-linux-gnu.so", false, true},
    {"_PyEval_EvalFrameDefault", "", false, true},
    {"PyEval_EvalCode", "", false, true},
    {"_PyObject_MakeTpCall", "", false, true},
    {"PyObject_Call", "", false, true},
    {"PyObject_Vectorcall", "", false, true},
    {"_PyFunction_Vectorcall", "", false, true},
    {"method_vectorcall_VARARGS", "", false, true},
    {"cfunction_call", "", false, true},
    {"cfunction_vectorcall_FASTCALL", "", false, true},
    {"Py_BytesMain", "", false, true},
};

static void
test_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct frame_case *c = &cases[i];
        struct snap_frame f = {c->name, c->filename, 0};
        if (frame_filter_hides(&f, false) != c->hidden ||
            frame_filter_hides(&f, true) != c->hidden_with_python)
            fail_msg("%s (%s): hidden %d/%d, expected %d/%d", c->name, c->filename,
                     frame_filter_hides(&f, false), frame_filter_hides(&f, true), c->hidden,
                     c->hidden_with_python);
    }
    struct snap_frame py = {"f", "/home/u/train.py", 1}, pyc = {"f", "/home/u/train.pyc", 1};
    struct snap_frame none = {NULL, NULL, 0};
    assert_true(frame_filter_is_python(&py));
    assert_false(frame_filter_is_python(&pyc));
    assert_false(frame_filter_is_python(&none));
    assert_false(frame_filter_hides(&none, true));
}

/* A stack of frames given as (name, filename) pairs, innermost first, every line 1 (so equal
 * frames in two stacks are one frame, as one source line gives). */
static uint32_t
stack_of(struct snapshot *snap, const char *const *pairs, size_t n)
{
    uint32_t frames[16], stack;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(snapshot_add_frame(snap, pairs[2 * i], pairs[2 * i + 1], 1, &frames[i]),
                         0);
    assert_int_equal(snapshot_add_stack(snap, frames, n, &stack), 0);
    return stack;
}

static void
assert_stack_names(const struct snapshot *snap, uint32_t stack, const char *const *names, size_t n)
{
    const struct snap_stack *st = &snap->stacks[stack];
    assert_int_equal(st->count, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(snap->frames[snap->stack_frames[st->first + i]].name, names[i]);
}

static void
test_apply(void **state)
{
    (void)state;
    struct snapshot *snap = snapshot_create(1);
    assert_non_null(snap);
    static const char *const direct[] = {"c10::cuda::CUDACachingAllocator::raw_alloc",
                                         "a.cpp",
                                         "at::empty",
                                         "a.cpp",
                                         "_PyObject_MakeTpCall",
                                         "Objects/call.c",
                                         "train_step",
                                         "train.py",
                                         "_start",
                                         "python3"};
    static const char *const routed[] = {"torch::unwind::unwind()",
                                         "u.cpp",
                                         "at::detail::empty_cuda",
                                         "a.cpp",
                                         "at::empty",
                                         "a.cpp",
                                         "cfunction_call",
                                         "Objects/methodobject.c",
                                         "_PyObject_MakeTpCall",
                                         "Objects/call.c",
                                         "train_step",
                                         "train.py",
                                         "_start",
                                         "python3"};
    static const char *const no_python[] = {"at::empty",      "a.cpp", "_PyObject_MakeTpCall",
                                            "Objects/call.c", "main",  "m.c"};
    static const char *const machinery[] = {"at::empty", "a.cpp", "__libc_start_main", "libc"};
    uint32_t s1 = stack_of(snap, direct, 5), s2 = stack_of(snap, routed, 7);
    uint32_t s3 = stack_of(snap, no_python, 3), s4 = stack_of(snap, machinery, 2);
    assert_int_not_equal(s1, s2);
    struct snap_segment seg = {.device = 0, .addr = 1 << 20, .total_size = 4096, .stack = s2};
    assert_int_equal(snapshot_add_segment(snap, &seg), 0);
    const uint32_t stacks[] = {s1, s2, s3, s4, 0};
    for (size_t i = 0; i < 5; i++) {
        struct snap_block b = {.addr = (1 << 20) + 512 * i, .size = 512, .stack = stacks[i]};
        struct snap_entry e = {.addr = b.addr, .size = 512, .stack = stacks[i]};
        assert_int_equal(snapshot_add_block(snap, &b), 0);
        assert_int_equal(snapshot_add_entry(snap, 0, &e), 0);
    }
    assert_int_equal(frame_filter_apply(snap), 0);

    /* The two Python stacks: one stack, train_step alone. */
    static const char *const user[] = {"train_step"};
    assert_int_equal(snap->blocks[0].stack, snap->blocks[1].stack);
    assert_stack_names(snap, snap->blocks[0].stack, user, 1);
    assert_int_equal(snap->segments[0].stack, snap->blocks[0].stack);
    assert_int_equal(snap->device_traces[0].entries[1].stack, snap->blocks[0].stack);
    /* Without a Python frame the interpreter's frame stays; at::empty goes. */
    static const char *const c_user[] = {"_PyObject_MakeTpCall", "main"};
    assert_stack_names(snap, snap->blocks[2].stack, c_user, 2);
    /* Nothing but machinery: unchanged. The empty stack stays empty. */
    assert_int_equal(snap->blocks[3].stack, s4);
    assert_int_equal(snap->blocks[4].stack, 0);
    snapshot_free(snap);
}

/* A frame as (name, filename, line). */
struct tframe {
    const char *name, *file;
    int64_t line;
};

static uint32_t
stack_from(struct snapshot *snap, const struct tframe *f, size_t n)
{
    uint32_t frames[16], stack;
    for (size_t i = 0; i < n; i++)
        assert_int_equal(snapshot_add_frame(snap, f[i].name, f[i].file, f[i].line, &frames[i]), 0);
    assert_int_equal(snapshot_add_stack(snap, frames, n, &stack), 0);
    return stack;
}

#define SITES  "/v/lib/python3.11/site-packages/"
#define CUBLAS "/usr/local/cuda/lib64/libcublas.so.13"

/* Each stack, filtered, named as reports name it (cli_site_name of 3 frames). */
static const struct {
    struct tframe frames[10];
    size_t n;
    const char *name;
    size_t kept;
} entry_cases[] = {
    /* cuBLAS: its internal offsets collapse into cublasCreate_v2, named by the library file. */
    {{{"cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13", 0},
      {"libcublas.so.13+0x5b45ed", CUBLAS, 0},
      {"libcublas.so.13+0x5b0011", CUBLAS, 0},
      {"libcublas.so.13+0x1f00", CUBLAS, 0},
      {"libcublas.so.13+0x99", CUBLAS, 0},
      {"cublasCreate_v2", CUBLAS, 0},
      {"main", "app.c", 41},
      {"__libc_start_main", "/lib/x86_64-linux-gnu/libc.so.6", 0}},
     8,
     "cublasCreate_v2 (libcublas.so.13) < main (app.c:41)",
     2},
    /* A stripped library without a named entry: its outermost offset stands for it. */
    {{{"libfoo.so+0x10", "/opt/libfoo.so", 0},
      {"libfoo.so+0x20", "/opt/libfoo.so", 0},
      {"main", "app.c", 9}},
     3,
     "libfoo.so+0x20 (/opt/libfoo.so) < main (app.c:9)",
     2},
    /* nvcc's static runtime inside the program: hidden as the shared one is. */
    {{{"cudaMalloc", "/home/u/app", 0},
      {"libcudart_static_4d8b33a106dceb3c07a56e26de61f545ff6e5ec8", "/home/u/app", 0},
      {"libcudart_static_0028031a846b44ea26c2c079c3f6a04c41d82424", "/home/u/app", 0},
      {"main", "app.cu", 12}},
     4,
     "main (app.cu:12)",
     1},
    /* A binding in site-packages: named by the user's line, its entry point beside it. */
    {{{"cuMemAlloc_v2", "/usr/lib/libcuda.so.1", 0},
      {"ffi_call_unix64", "/usr/lib/x86_64-linux-gnu/libffi.so.8", 0},
      {"safe_cuda_api_call", SITES "numba/cuda/cudadrv/driver.py", 319},
      {"Context.memalloc", SITES "numba/cuda/cudadrv/driver.py", 1200},
      {"to_device", SITES "numba/cuda/api.py", 100},
      {"load", "/home/u/app.py", 7},
      {"<module>", "/home/u/app.py", 12},
      {"_run_code", "<frozen runpy>", 88},
      {"Py_BytesMain", "/usr/bin/python3.11", 0}},
     9,
     "load (/home/u/app.py:7) via numba.cuda.api.to_device < <module> (/home/u/app.py:12)",
     3},
    /* Nothing but library code: shown as it is. */
    {{{"a", SITES "pkg/a.py", 1}, {"b", SITES "pkg/b.py", 2}},
     2,
     "a (" SITES "pkg/a.py:1) < b (" SITES "pkg/b.py:2)",
     2},
    /* A thread's bootstrap in the standard library goes; the user's frames stay. */
    {{{"alloc", "/home/u/app.py", 5},
      {"worker", "/home/u/app.py", 9},
      {"Thread.run", "/usr/lib/python3.11/threading.py", 975},
      {"Thread._bootstrap_inner", "/usr/lib/python3.11/threading.py", 1038}},
     4,
     "alloc (/home/u/app.py:5) < worker (/home/u/app.py:9)",
     2},
    /* A native module of a package (CuPy's Cython) between the user's code and CUDA. */
    {{{"cudaMalloc", "/usr/lib/libcudart.so.13", 0},
      {"__pyx_f_malloc", SITES "cupy_backends/cuda/api/runtime.cpython-311-x86_64-linux-gnu.so", 0},
      {"zeros", SITES "cupy/_creation/basic.py", 211},
      {"step", "/home/u/train.py", 30}},
     4,
     "step (/home/u/train.py:30) via cupy._creation.basic.zeros",
     2},
};

static void
test_entries(void **state)
{
    (void)state;
    size_t ncases = sizeof entry_cases / sizeof entry_cases[0];
    struct snapshot *snap = snapshot_create(1);
    assert_non_null(snap);
    for (size_t i = 0; i < ncases; i++) {
        struct snap_entry e = {.addr = 512 * (i + 1), .size = 512};
        e.stack = stack_from(snap, entry_cases[i].frames, entry_cases[i].n);
        assert_int_equal(snapshot_add_entry(snap, 0, &e), 0);
    }
    assert_int_equal(frame_filter_apply(snap), 0);
    for (size_t i = 0; i < ncases; i++) {
        uint32_t stack = snap->device_traces[0].entries[i].stack;
        char name[1024];
        cli_site_name(snap, stack, 3, name, sizeof name);
        if (strcmp(name, entry_cases[i].name) != 0 ||
            snap->stacks[stack].count != entry_cases[i].kept)
            fail_msg("case %zu: \"%s\" in %u frames, expected \"%s\" in %zu", i, name,
                     snap->stacks[stack].count, entry_cases[i].name, entry_cases[i].kept);
    }
    /* The via frame is a frame of its own: first, file "", line unknown. */
    const struct snap_stack *st = &snap->stacks[snap->device_traces[0].entries[3].stack];
    const struct snap_frame *via = &snap->frames[snap->stack_frames[st->first]];
    assert_string_equal(via->name, "via numba.cuda.api.to_device");
    assert_string_equal(via->filename, "");
    assert_true(cli_frame_is_via(snap, snap->stack_frames[st->first]));
    assert_false(cli_frame_is_via(snap, snap->stack_frames[st->first + 1]));
    snapshot_free(snap);

    struct snap_frame bare = {"libcublas.so.13+0x5b45ed", CUBLAS, 0};
    struct snap_frame named = {"cublasCreate_v2", CUBLAS, 0};
    struct snap_frame other = {"libcublas.so.13+0x5b45ed", "/lib/libother.so", 0};
    struct snap_frame nohex = {"libcublas.so.13+0xzz", CUBLAS, 0};
    assert_true(frame_entry_is_bare(&bare));
    assert_false(frame_entry_is_bare(&named));
    assert_false(frame_entry_is_bare(&other));
    assert_false(frame_entry_is_bare(&nohex));
    struct snap_frame lib = {"f", SITES "numba/a.py", 1}, user = {"f", "/home/u/a.py", 1};
    assert_true(frame_entry_is_library(&lib));
    assert_false(frame_entry_is_library(&user));
}

/* --all-frames reads no filter: the printed stack of a via frame, folded beside the next. */
static void
test_print_via(void **state)
{
    (void)state;
    struct snapshot *snap = snapshot_create(1);
    assert_non_null(snap);
    const struct tframe f[] = {{"via fakebinding.api.to_device", "", 0},
                               {"load", "app.py", 7},
                               {"<module>", "app.py", 12}};
    uint32_t stack = stack_from(snap, f, 3);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    cli_print_stack(out, snap, stack, 2, 8);
    cli_print_stack(out, snap, stack, 2, 1);
    fclose(out);
    assert_string_equal(buf, "  load (app.py:7) via fakebinding.api.to_device\n"
                             "  <module> (app.py:12)\n"
                             "  load (app.py:7) via fakebinding.api.to_device\n"
                             "  ... 1 more\n");
    free(buf);
    snapshot_free(snap);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_apply),
        cmocka_unit_test(test_entries),
        cmocka_unit_test(test_print_via),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
