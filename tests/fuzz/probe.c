/* probe: the smallest libFuzzer target; meson compiles it to find out whether clang can build
 * fuzzers here (clang with libclang-rt's fuzzer runtime). Lock: none. Hot path: n/a. */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)data;
    (void)size;
    return 0;
}
