/* test_python_paths.c: the interpreter's library directories told from a path (a table of the
 * paths real interpreters give: Debian's, pyenv's, a venv, conda, frozen and zipped modules, native
 * modules), the package a file belongs to and its module's dotted name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "snapshot/python_paths.h"

struct path_case {
    const char *path;
    enum python_path_kind kind;
    const char *package; /* NULL for a user file */
    const char *module;  /* "" for a user file */
};

static const struct path_case cases[] = {
    /* The user's own code, wherever it lies (even under a folder called lib). */
    {"/home/u/train.py", PYTHON_PATH_USER, NULL, ""},
    {"app.py", PYTHON_PATH_USER, NULL, ""},
    {"/home/u/lib/tools.py", PYTHON_PATH_USER, NULL, ""},
    {"/home/u/mylib/python3.11/x.py", PYTHON_PATH_USER, NULL, ""},
    {"/home/u/lib/pythonista/x.py", PYTHON_PATH_USER, NULL, ""},
    {"/home/u/my-site-packages/x.py", PYTHON_PATH_USER, NULL, ""},
    {"<string>", PYTHON_PATH_USER, NULL, ""},
    {"", PYTHON_PATH_USER, NULL, ""},
    /* Installed packages: venv, Debian, conda, pip --user; Python files and native modules. */
    {"/v/lib/python3.11/site-packages/numba/cuda/api.py", PYTHON_PATH_PACKAGES, "numba",
     "numba.cuda.api"},
    {"/v/lib/python3.11/site-packages/numba/cuda/__init__.py", PYTHON_PATH_PACKAGES, "numba",
     "numba.cuda"},
    {"/usr/lib/python3/dist-packages/six.py", PYTHON_PATH_PACKAGES, "six", "six"},
    {"/opt/conda/lib/python3.12/site-packages/cupy_backends/cuda/api/"
     "runtime.cpython-312-x86_64-linux-gnu.so",
     PYTHON_PATH_PACKAGES, "cupy_backends", "cupy_backends.cuda.api.runtime"},
    {"/home/u/.local/lib/python3.11/site-packages/_cffi_backend.cpython-311-x86_64-linux-gnu.so",
     PYTHON_PATH_PACKAGES, "_cffi_backend", "_cffi_backend"},
    {"site-packages/fakebinding/api.py", PYTHON_PATH_PACKAGES, "fakebinding", "fakebinding.api"},
    /* The standard library: Debian's, pyenv's, a free-threaded build, zipped, frozen, native. */
    {"/usr/lib/python3.11/ctypes/__init__.py", PYTHON_PATH_STDLIB, "ctypes", "ctypes"},
    {"/usr/lib/python3.11/threading.py", PYTHON_PATH_STDLIB, "threading", "threading"},
    {"/home/u/.pyenv/versions/3.12.1/lib/python3.12/asyncio/events.py", PYTHON_PATH_STDLIB,
     "asyncio", "asyncio.events"},
    {"/usr/local/lib/python3.13t/runpy.py", PYTHON_PATH_STDLIB, "runpy", "runpy"},
    {"/usr/lib64/python3.9/json/decoder.py", PYTHON_PATH_STDLIB, "json", "json.decoder"},
    {"/opt/py/lib/python311.zip/zipimport.py", PYTHON_PATH_STDLIB, "zipimport", "zipimport"},
    {"/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so", PYTHON_PATH_STDLIB,
     "_ctypes", "_ctypes"},
    {"<frozen runpy>", PYTHON_PATH_STDLIB, "runpy", "runpy"},
    {"<frozen importlib._bootstrap>", PYTHON_PATH_STDLIB, "importlib", "importlib._bootstrap"},
};

static void
test_classify(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct path_case *c = &cases[i];
        struct python_path p;
        python_path_classify(c->path, &p);
        char module[256];
        python_path_module(c->path, &p, module, sizeof module);
        char package[256] = "";
        if (python_path_is_library(&p))
            snprintf(package, sizeof package, "%.*s", (int)p.package_len, c->path + p.rel);
        if (p.kind != c->kind || strcmp(package, c->package ? c->package : "") != 0 ||
            strcmp(module, c->module) != 0)
            fail_msg("%s: kind %d package \"%s\" module \"%s\"; expected %d \"%s\" \"%s\"", c->path,
                     p.kind, package, module, c->kind, c->package ? c->package : "", c->module);
    }
    struct python_path p;
    python_path_classify(NULL, &p);
    assert_int_equal(p.kind, PYTHON_PATH_USER);
    /* A short buffer: cut, still a string. */
    char small[6];
    python_path_classify(cases[8].path, &p);
    assert_string_equal(python_path_module(cases[8].path, &p, small, sizeof small), "numba");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
