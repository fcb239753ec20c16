/* guard.c: storage of the thread-local guard (see guard.h). */
#include "preload/guard.h"

_Thread_local unsigned guard_depth __attribute__((tls_model("initial-exec")));
