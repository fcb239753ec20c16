/* layout_check.c: cuprof's table of CPython field offsets (snapshot/python_frames.c) against
 * CPython's own headers. Compiled once per CPython whose headers are on the machine, by
 * test_layouts.py; prints one line per field that differs and exits 1 if any does. */
#define Py_BUILD_CORE 1
#include <Python.h>
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#else
#include <frameobject.h>
#endif
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "snapshot/python_frames.h"

static int failures;

static void
expect(const char *field, size_t ours, size_t theirs)
{
    if (ours != theirs) {
        printf("CPython %s: %s is %zu, cuprof reads %zu\n", PY_VERSION, field, theirs, ours);
        failures++;
    }
}

/* The bits of PyASCIIObject.state cuprof decodes (kind 3 bits at 2, compact 0x20, ascii 0x40). */
static void
check_str_state(void)
{
    PyASCIIObject a;
    unsigned word;
    memset(&a, 0, sizeof(a));
    a.state.kind = 4;
    a.state.compact = 1;
    a.state.ascii = 1;
    memcpy(&word, (const char *)&a + offsetof(PyASCIIObject, state), sizeof(word));
    expect("PyASCIIObject.state bits (kind 4, compact, ascii)", 0x70, word);
}

int
main(void)
{
    const struct python_layout *L = python_frames_layout(PY_MINOR_VERSION);
    if (L == NULL) {
        printf("CPython %s: not in cuprof's table\n", PY_VERSION);
        return 1;
    }
#if PY_VERSION_HEX < 0x030B0000
    expect("PyThreadState.frame", L->tstate_frame, offsetof(PyThreadState, frame));
    expect("PyFrameObject.f_back", L->frame_previous, offsetof(PyFrameObject, f_back));
    expect("PyFrameObject.f_code", L->frame_code, offsetof(PyFrameObject, f_code));
    expect("PyFrameObject.f_lasti", L->frame_instr, offsetof(PyFrameObject, f_lasti));
    expect("interpreter frames", L->interpreter_frames, 0);
#else
#if PY_VERSION_HEX < 0x030D0000
    expect("PyThreadState.cframe", L->tstate_frame, offsetof(PyThreadState, cframe));
    expect("_PyCFrame.current_frame", L->cframe_current, offsetof(_PyCFrame, current_frame));
    expect("via cframe", L->via_cframe, 1);
    expect("_PyInterpreterFrame.f_code", L->frame_code, offsetof(_PyInterpreterFrame, f_code));
    expect("_PyInterpreterFrame.prev_instr", L->frame_instr,
           offsetof(_PyInterpreterFrame, prev_instr));
#else
    expect("PyThreadState.current_frame", L->tstate_frame, offsetof(PyThreadState, current_frame));
    expect("via cframe", L->via_cframe, 0);
    expect("_PyInterpreterFrame.f_executable", L->frame_code,
           offsetof(_PyInterpreterFrame, f_executable));
    expect("_PyInterpreterFrame.instr_ptr", L->frame_instr,
           offsetof(_PyInterpreterFrame, instr_ptr));
#endif
    expect("interpreter frames", L->interpreter_frames, 1);
    expect("_PyInterpreterFrame.previous", L->frame_previous,
           offsetof(_PyInterpreterFrame, previous));
    expect("_PyInterpreterFrame.owner", L->frame_owner, offsetof(_PyInterpreterFrame, owner));
    expect("sizeof owner", 1, sizeof(((_PyInterpreterFrame *)0)->owner));
    expect("FRAME_OWNED_BY_GENERATOR", (size_t)L->owner_generator, FRAME_OWNED_BY_GENERATOR);
#if PY_VERSION_HEX < 0x030C0000
    expect("_PyInterpreterFrame.is_entry", L->frame_is_entry,
           offsetof(_PyInterpreterFrame, is_entry));
#else
    expect("FRAME_OWNED_BY_CSTACK", (size_t)L->owner_cstack, FRAME_OWNED_BY_CSTACK);
#endif
    expect("PyCodeObject.co_qualname", L->code_qualname, offsetof(PyCodeObject, co_qualname));
    expect("PyCodeObject.co_code_adaptive", L->code_adaptive,
           offsetof(PyCodeObject, co_code_adaptive));
    expect("PyCodeObject._co_firsttraceable", L->code_firsttraceable,
           offsetof(PyCodeObject, _co_firsttraceable));
    expect("sizeof _co_firsttraceable", sizeof(int),
           sizeof(((PyCodeObject *)0)->_co_firsttraceable));
#endif
    expect("PyCodeObject.co_name", L->code_name, offsetof(PyCodeObject, co_name));
    expect("PyCodeObject.co_filename", L->code_filename, offsetof(PyCodeObject, co_filename));
    expect("PyCodeObject.co_firstlineno", L->code_firstlineno,
           offsetof(PyCodeObject, co_firstlineno));
    expect("PyObject.ob_type", 8, offsetof(PyObject, ob_type));
    expect("PyASCIIObject.length", L->str_length, offsetof(PyASCIIObject, length));
    expect("PyASCIIObject.state", L->str_state, offsetof(PyASCIIObject, state));
    expect("sizeof(PyASCIIObject)", L->str_ascii_size, sizeof(PyASCIIObject));
    expect("sizeof(PyCompactUnicodeObject)", L->str_compact_size, sizeof(PyCompactUnicodeObject));
    check_str_state();
    if (failures == 0)
        printf("CPython %s: every offset matches\n", PY_VERSION);
    return failures != 0;
}
