/* sites_train.c: a stand-in for Python code. `#line` files train_step under train.py with the
 * lines of this file, so its frame is shaped as PyTorch records Python frames ({name, filename
 * ending in .py, line}). */
#include "tests/integration/cli/sites_app.h"

#line 7 "train.py"
size_t
train_step(void)
{
    size_t bytes = 0;
    for (int i = 0; i < 4; i++) {
        size_t n = ((size_t)2 << 20) + (size_t)i * 8192;
        if (_PyObject_MakeTpCall(n, i % 2) == NULL) /* sites_train: the step's line */
            return 0;
        bytes += n;
    }
    return bytes;
}
