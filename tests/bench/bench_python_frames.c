/* bench_python_frames.c: the cost of reading 20 Python frames, in a program that embeds CPython:
 * Python code recurses 20 deep and calls back into this program (ctypes), which times
 * python_frames_capture and a whole stack capture with and without Python frames. The baseline
 * is the native-only capture of the same thread (what every allocation pays without Python).
 * Lines: `name: value unit (ratio× baseline)`. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <time.h>

#include "bench_clock.h"
#include "snapshot/python_frames.h"
#include "snapshot/stacks.h"

#define ROUNDS 20000
#define REPS   5

static double
time_python_capture(size_t *frames)
{
    struct python_capture py;
    double t0 = now_ns();
    for (int i = 0; i < ROUNDS; i++)
        python_frames_capture(&py);
    *frames = py.count;
    return (now_ns() - t0) / ROUNDS;
}

static double
time_stack_capture(bool with_python)
{
    python_frames_enable(with_python);
    double t0 = now_ns();
    for (int i = 0; i < ROUNDS; i++)
        (void)stacks_capture(0);
    python_frames_enable(true);
    return (now_ns() - t0) / ROUNDS;
}

/* Called from Python, 20 frames deep (exported: the program is linked with -rdynamic). */
__attribute__((visibility("default"))) int
bench_from_python(void)
{
    double py[REPS], with[REPS], without[REPS];
    size_t frames = 0;
    (void)time_stack_capture(true); /* warm: intern every stack and frame once */
    for (int r = 0; r < REPS; r++) {
        py[r] = time_python_capture(&frames);
        with[r] = time_stack_capture(true);
        without[r] = time_stack_capture(false);
    }
    double base = median(without, REPS);
    if (frames < 20) {
        fprintf(stderr, "bench_python_frames: only %zu Python frames read\n", frames);
        return 1;
    }
    printf("python_capture_%zu_frames: %.1f ns (%.2fx native_stack_capture)\n", frames,
           median(py, REPS), median(py, REPS) / base);
    printf("stack_capture_with_python: %.1f ns (%.2fx native_stack_capture)\n", median(with, REPS),
           median(with, REPS) / base);
    return 0;
}

static const char program[] = "import ctypes\n"
                              "me = ctypes.PyDLL(None)\n"
                              "def down(n):\n"
                              "    return me.bench_from_python() if n == 0 else down(n - 1)\n"
                              "assert down(18) == 0\n"; /* + <module> + down(0) = 20 frames */

int
main(void)
{
    stacks_configure(STACKS_ALLOC, 32);
    Py_Initialize();
    int rc = PyRun_SimpleString(program);
    if (Py_FinalizeEx() != 0)
        rc = 1;
    return rc == 0 ? 0 : 1;
}
