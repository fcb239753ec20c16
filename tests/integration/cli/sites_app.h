/* sites_app.h: what the two files of sites_app share (see sites_app.c). */
#ifndef CUPROF_TESTS_SITES_APP_H
#define CUPROF_TESTS_SITES_APP_H

#include <stddef.h>

/* The Python-shaped function (sites_train.c): allocates by both routes from one line; returns
 * the bytes requested. */
size_t train_step(void);
/* The interpreter's call of a C function from Python code: route 0 straight to at::empty, 1
 * through cfunction_call. */
void *_PyObject_MakeTpCall(size_t size, int route);

#endif
