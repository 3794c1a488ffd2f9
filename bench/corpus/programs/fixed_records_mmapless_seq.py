"""Fixed 4 KiB records read in order with readinto into one reused 256 KiB bytearray (no mmap).

DATA holds 4 raw record files (DATA/part_0.rec ... part_3.rec), each 2048 records of 4096
bytes back to back with no header (8 MiB a file, 32 MiB in all; each record starts with its
global number as a little-endian uint64, the rest random bytes). The files are read in name
order, the same every epoch, one at a time: open(path, "rb") (a buffered reader), then
f.readinto(buf) into one bytearray of 64 records (262144 bytes), allocated once and reused
for the whole run, until readinto returns 0; each full read is one batch of 64 records,
checked through a numpy view of the bytearray, then 5 ms of sleep as compute. Main thread
only, no shuffle, 2 epochs of 128 steps (32 per file).

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write), all on
the main thread: per file openat(O_RDONLY|O_CLOEXEC), fstat, lseek(0, SEEK_CUR), then 32
reads of 262144 bytes, each straight into the bytearray (the request is larger than the
buffered reader's 4 KiB buffer, so it passes through whole: no 4 KiB reads, no splitting),
at offsets 0, 256 KiB, ... 7.75 MiB, one per step with 5 ms of no I/O between them, then one
more read of 262144 that returns 0 (end of file), close. No lseek between reads, no pread. 8
file visits, 264 reads, 256 of them full: 67108864 bytes, every byte read exactly once per
epoch, strictly forward. No writes.

Usage: fixed_records_mmapless_seq.py DATA [--make | --truth]
Fixed by the program: 4 files x 2048 records of 4096 bytes, batch 64 records (one 256 KiB
readinto), main thread only, no read ahead, 2 epochs of 128 steps, 5 ms compute per step,
files in name order, no shuffle, no checkpoint, no eval. Needs numpy only.
"""
import json
import os
import sys
import time

import numpy as np

FILES, RECORDS, RECORD_BYTES, BATCH, EPOCHS, COMPUTE_S = 4, 2048, 4096, 64, 2, 0.005
SEED = 4096


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".rec")) \
        if os.path.isdir(data) else []


def truth(data):
    fsz = [os.path.getsize(f) for f in file_names(data)]
    steps = FILES * RECORDS // BATCH
    return {
        "program": "fixed_records_mmapless_seq", "needs": [], "format": "raw fixed-size records",
        "io_library": "open(path, 'rb').readinto(bytearray) (buffered reader, no mmap)",
        "data_layout": "DATA/part_k.rec, 2048 records of 4096 bytes each, no header",
        "num_files": FILES, "samples_per_file": RECORDS,
        "sample_size": {"dist": "fixed", "bytes": RECORD_BYTES},
        "file_size": {"dist": "fixed", "bytes": fsz[0] if fsz else RECORDS * RECORD_BYTES,
                      "total": int(sum(fsz))},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S, "shuffle": None,
        "file_order": "by name, the same every epoch", "eval": None, "checkpoint": None,
        "side_files": [],
        "read_pattern": "each file read front to back in 262144-byte reads (one batch of 64 "
                        "records per read) into one reused bytearray, plus one 0-byte read at "
                        "the end of each file; main thread, one file open at a time",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    for k in range(FILES):
        rng = np.random.default_rng(SEED + k)
        recs = rng.integers(0, 255, (RECORDS, RECORD_BYTES), dtype=np.uint8)
        recs[:, :8] = np.arange(k * RECORDS, (k + 1) * RECORDS, dtype="<u8").view(np.uint8) \
            .reshape(RECORDS, 8)  # each record starts with its global number
        recs.tofile(os.path.join(data, f"part_{k}.rec"))


def train(data):
    names = file_names(data)
    buf = bytearray(BATCH * RECORD_BYTES)
    view = np.frombuffer(buf, dtype=np.uint8).reshape(BATCH, RECORD_BYTES)
    for epoch in range(EPOCHS):
        steps = 0
        for path in names:
            with open(path, "rb") as f:
                while True:
                    n = f.readinto(buf)
                    if n == 0:
                        break
                    assert n == len(buf)
                    ids = view[:, :8].copy().view("<u8")[:, 0]
                    assert ids[-1] - ids[0] == BATCH - 1
                    time.sleep(COMPUTE_S)
                    steps += 1
        assert steps == FILES * RECORDS // BATCH


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
