/* nvtx_export: NVTX's API as a shared library's exports, built the way nvToolsExt.h documents for
 * languages that call C through a foreign-function interface (NVTX_EXPORT_API): a Python program
 * uses NVTX through ctypes on it (tests/integration/pymodule). No code of its own. */
#define NVTX_EXPORT_API
#define NVTX_AS_SYSTEM_HEADER
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtMem.h>
