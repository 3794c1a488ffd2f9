"""Reads raw files into one reused bytearray, then one file into a fresh anonymous mapping.

DATA holds 4 files of 1 MiB (part_0.bin ... part_3.bin, random bytes). Each is read in
order with readinto into one bytearray of 256 KiB (4 reads a file, 2 ms of sleep after
each: a step), twice (2 epochs). CPython allocates a bytearray that large with malloc, which
glibc maps on its own behind a 16-byte header, so its bytes start 16 bytes past a page. At
the end, a side file of 64 KiB beside DATA (DATA.side) is read into a new
mmap.mmap(-1, 64 KiB): 16 pages the process has never touched.

Prints, as JSON on its last line, where the bytearray's bytes start past a 4 KiB page
boundary, as the program itself sees it (ctypes), for the test to hold the trace to.

Usage: bytearray_readinto.py DATA [--make]. Needs nothing beyond the standard library.
"""
import ctypes
import json
import mmap
import os
import sys
import time

FILES, FILE_BYTES, READ_BYTES, EPOCHS, COMPUTE_S = 4, 1 << 20, 256 << 10, 2, 0.002


SIDE_BYTES = 64 << 10


def make(data):
    os.makedirs(data, exist_ok=True)
    for k in range(FILES):
        with open(os.path.join(data, f"part_{k}.bin"), "wb") as f:
            f.write(os.urandom(FILE_BYTES))
    with open(data.rstrip("/") + ".side", "wb") as f:
        f.write(os.urandom(SIDE_BYTES))


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".bin"))
    buf = bytearray(READ_BYTES)
    address = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))
    for _ in range(EPOCHS):
        for path in names:
            with open(path, "rb", buffering=0) as f:
                while f.readinto(buf):
                    time.sleep(COMPUTE_S)
    fresh = mmap.mmap(-1, SIDE_BYTES)
    with open(data.rstrip("/") + ".side", "rb", buffering=0) as f:
        f.readinto(fresh)
    print(json.dumps({"bytearray_page_offset": address % 4096}))


if __name__ == "__main__":
    if "--make" in sys.argv[2:]:
        make(sys.argv[1])
    else:
        train(sys.argv[1])
