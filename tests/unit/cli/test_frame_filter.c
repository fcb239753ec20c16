/* test_frame_filter.c: which frames reports hide (a table of frames as real stacks hold them,
 * from cuprof, NVIDIA's libraries, PyTorch and CPython), and the rewrite of a snapshot's stacks:
 * stacks that differ only in hidden frames become one, a stack of nothing but machinery stays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_apply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
