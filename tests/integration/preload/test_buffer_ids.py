#!/usr/bin/env python3
"""CU_POINTER_ATTRIBUTE_BUFFER_ID under cuprof (buffer_id_app.c): cuda.h guarantees an ID unique
within the process. In cache mode the driver's ID of a block would be its segment's, shared by
every block cut from it and kept across a cached reuse; each block the cache hands out answers an
ID of its own instead, new for every allocation, from 2^63 up (below lies every ID a driver
hands out). Alone, in trace and in off mode the driver answers.

Usage: test_buffer_ids.py --lib LIB --ld-path PATH APP
"""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import shimrun  # noqa: E402 (tests/integration/)

ALONE = ("live distinct=1 inside_same=1 plural_same=1\n"
         "reuse same_address=1 new_id=1 b_kept=1\n"
         "others distinct=1\n"
         "top_bit=0\n")
CACHE = ALONE.replace("top_bit=0", "top_bit=1")


def main():
    a = shimrun.app_arguments()
    check = shimrun.Checks()
    shimrun.answers_in_every_mode(check, a, ALONE, CACHE)
    check.finish()


if __name__ == "__main__":
    main()
