"""DALI-style image-classification input pipeline, emulated in pure Python: a "file reader"
walks a file_list.txt in list order, 3 reader threads load whole JPEG files with
os.preadv straight into a preallocated arena of fixed-size buffers, and randomness comes
only from a DALI-like shuffle buffer (random_shuffle=True, initial_fill=64). Decoding is
"on the GPU" (emulated by the compute sleep); the CPU only peeks at the JPEG header (SOF0
marker) for the image size, as nvJPEG's GetImageInfo does.

Data set (DATA/, about 25 MB):
  DATA/file_list.txt   640 lines "images/nCC/img_IIIII.jpg LABEL" (DALI file_list
                       format: relative path + integer label), sorted by class, 8 classes
                       x 80 files. Read once by the main process before training.
  DATA/images/nCC/img_IIIII.jpg   640 baseline-JPEG-structured files: SOI, APP0/JFIF,
                       DQT, SOF0 (height/width 224..512), DHT, SOS, an entropy-coded
                       payload of pseudo-random bytes (no 0xFF bytes), EOI. Size =
                       clip(H * W * bpp / 8, 8 KiB, 160 KiB) with bpp log-normal around 2.2
                       bits/pixel: 8 KiB .. 160 KiB, ~39 KB mean.

Training: the main process reads file_list.txt, allocates an arena of 160 slots x 160 KiB
(np.empty) and starts one "loader" thread. The loader goes through the list in order,
epoch after epoch (3 passes, 1920 file reads), in chunks of 16: ThreadPoolExecutor(3)
.map(read_one, chunk). read_one takes a free arena slot, os.open()s the file, os.fstat()s
it for the size, os.preadv()s the whole file into arena[slot, :size] and closes. Each
loaded sample goes into a 64-entry shuffle buffer; once the buffer is full every new
sample evicts a random buffer entry (numpy rng seeded 4242+7), which is appended to the
batch being built. Batches of 16 go into a queue of depth 2 (DALI prefetch_queue_depth);
after the last read the buffer is drained in random order. The shuffle buffer spans epoch
boundaries (DALI does not reset it), so the 3 x 40 = 120 steps are one stream. Per step
the main thread checks SOI/EOI, parses SOF0 of each of the 16 buffers, sleeps 20 ms
(decode + forward/backward) and returns the 16 slots to the free list. Because the list is
class-sorted and the buffer small, batches hold only ~3.3 of the 8 classes on average
(printed at the end): the classic "DALI shuffle buffer too small" effect. No eval, no checkpoint.

What a syscall trace sees: one process. The main thread opens file_list.txt once
(openat, 2 x fstat, 2 x lseek(0, SEEK_CUR), read(17281) = 17280, read(1) = 0, close).
Three reader threads (ThreadPoolExecutor threads of the main process, one thread id
each) do every data read: per file openat(images/nCC/img_IIIII.jpg,
O_RDONLY|O_CLOEXEC), newfstatat(fd, "", AT_EMPTY_PATH) for the size, ONE
preadv2(fd, [1 iovec of exactly the file size], 1, offset 0, flags 0) returning the whole
file (CPython's os.preadv issues preadv2), close. No lseek, no read(), no short reads,
no read at EOF. Files are read strictly in file_list order (00000, 00001, ...) three
times over; the three threads interleave within each 16-file chunk (~1/3 of the reads
each) and at most 16 reads are in flight. 1920 opens, 1920 preadv2 calls, ~75 MB read.
No writes.

Usage: dali_jpeg_preadv_arena_shufflebuf.py DATA [--make | --truth]
numpy only (standard-library threads + os.preadv).
"""
import json
import os
import queue
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

N_FILES, N_CLASSES = 640, 8
BATCH, READ_THREADS, PREFETCH, INITIAL_FILL, EPOCHS = 16, 3, 2, 64, 3
STEPS = N_FILES // BATCH
COMPUTE_S = 0.020
MIN_BYTES, MAX_BYTES = 8 * 1024, 160 * 1024
SLOTS = INITIAL_FILL + BATCH * (PREFETCH + 4)
SEED = 4242

SOI, EOI = b"\xff\xd8", b"\xff\xd9"
APP0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
DQT = b"\xff\xdb" + struct.pack(">H", 67) + b"\x00" + bytes(range(2, 66))
DHT = (b"\xff\xc4" + struct.pack(">H", 31) + b"\x00"
       + bytes([0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]) + bytes(range(12)))
SOS = b"\xff\xda" + struct.pack(">HB", 12, 3) + bytes([1, 0x00, 2, 0x11, 3, 0x11, 0, 0x3F, 0])


def sof0(h, w):
    return (b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, h, w, 3)
            + bytes([1, 0x22, 0, 2, 0x11, 0, 3, 0x11, 0]))


HEADER_BYTES = len(SOI + APP0 + DQT + sof0(1, 1) + DHT + SOS)  # 155


def spec():
    rng = np.random.default_rng(SEED)
    labels = np.repeat(np.arange(N_CLASSES), N_FILES // N_CLASSES)
    hs = rng.integers(224, 513, N_FILES)
    ws = rng.integers(224, 513, N_FILES)
    bpp = rng.lognormal(np.log(2.2), 0.35, N_FILES)
    sizes = np.clip((hs * ws * bpp / 8).astype(np.int64), MIN_BYTES, MAX_BYTES)
    return labels, hs, ws, sizes


def rel_name(i, label):
    return "images/n%02d/img_%05d.jpg" % (label, i)


def truth(data):
    labels, hs, ws, sizes = spec()
    return {
        "program": "dali_jpeg_preadv_arena_shufflebuf", "needs": [],
        "format": "JPEG-structured files (SOI/APP0/DQT/SOF0/DHT/SOS/payload/EOI), one "
                  "image per file, listed in a DALI file_list.txt",
        "io_library": "os.open + os.fstat + os.preadv (preadv2 syscall) into a preallocated numpy arena "
                      "(ThreadPoolExecutor reader threads)",
        "data_layout": "DATA/images/nCC/img_IIIII.jpg (8 class dirs x 80) + "
                       "DATA/file_list.txt",
        "num_files": N_FILES, "samples_per_file": 1,
        "sample_size": {"dist": "H*W*bpp/8, H,W uniform 224..512, bpp lognormal(ln 2.2, "
                                "0.35), clipped", "min_bytes": int(sizes.min()),
                        "max_bytes": int(sizes.max()), "mean_bytes": int(sizes.mean()),
                        "total_bytes": int(sizes.sum())},
        "batch_size": BATCH,
        "readers": {"kind": "threads of the main process (ThreadPoolExecutor) fed by one "
                            "loader thread", "count": READ_THREADS},
        "prefetch": {"queue_depth_batches": PREFETCH, "reads_in_flight_max": BATCH,
                     "arena_slots": SLOTS, "slot_bytes": MAX_BYTES},
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": EPOCHS * STEPS,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "none on disk: files read in file_list order (class-sorted) every "
                   "epoch; in-memory shuffle buffer of %d samples (DALI initial_fill), "
                   "spanning epochs" % INITIAL_FILL,
        "file_reads_total": EPOCHS * N_FILES,
        "bytes_read_total": int(EPOCHS * sizes.sum()),
        "eval": None, "checkpoint": None,
        "side_files": [{"path": "file_list.txt", "reads": 1, "process": "main"}],
        "read_pattern": "whole file per sample: openat, fstat, one preadv of the full "
                        "file size at offset 0, close; sequential in list order, 3 "
                        "threads interleaved",
    }


def make(data):
    labels, hs, ws, sizes = spec()
    rng = np.random.default_rng(SEED + 1)
    lines = []
    for i in range(N_FILES):
        rel = rel_name(i, labels[i])
        path = os.path.join(data, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        head = SOI + APP0 + DQT + sof0(int(hs[i]), int(ws[i])) + DHT + SOS
        payload = rng.integers(0, 255, int(sizes[i]) - len(head) - 2, dtype=np.uint8)
        with open(path, "wb") as f:
            f.write(head + payload.tobytes() + EOI)
        lines.append("%s %d\n" % (rel, labels[i]))
    with open(os.path.join(data, "file_list.txt"), "w") as f:
        f.writelines(lines)


def jpeg_shape(v):
    p = 2
    while True:
        marker = int(v[p + 1])
        seg = (int(v[p + 2]) << 8) | int(v[p + 3])
        if marker == 0xC0:
            return ((int(v[p + 5]) << 8) | int(v[p + 6]), (int(v[p + 7]) << 8) | int(v[p + 8]))
        if marker == 0xDA:
            raise ValueError("no SOF0 before SOS")
        p += 2 + seg


def train(data):
    with open(os.path.join(data, "file_list.txt")) as f:
        entries = [ln.split() for ln in f.read().splitlines() if ln.strip()]
    paths = [os.path.join(data, e[0]) for e in entries]
    labels = np.array([int(e[1]) for e in entries])
    n = len(paths)
    arena = np.empty((SLOTS, MAX_BYTES), dtype=np.uint8)
    free = queue.Queue()
    for s in range(SLOTS):
        free.put(s)
    out = queue.Queue(maxsize=PREFETCH)
    total = EPOCHS * n
    errors = []

    def read_one(i):
        slot = free.get()
        fd = os.open(paths[i], os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            view = arena[slot, :size]
            got = 0
            while got < size:
                k = os.preadv(fd, [view[got:]], got)
                if k == 0:
                    raise IOError("short file %s" % paths[i])
                got += k
        finally:
            os.close(fd)
        return slot, size, i

    def loader():
        try:
            rng = np.random.default_rng(SEED + 7)
            buf, batch = [], []

            def emit(item):
                batch.append(item)
                if len(batch) == BATCH:
                    out.put(list(batch))
                    batch.clear()

            with ThreadPoolExecutor(READ_THREADS, thread_name_prefix="reader") as pool:
                for start in range(0, total, BATCH):
                    chunk = [k % n for k in range(start, min(start + BATCH, total))]
                    for item in pool.map(read_one, chunk):
                        if len(buf) < INITIAL_FILL:
                            buf.append(item)
                        else:
                            j = int(rng.integers(INITIAL_FILL))
                            emit(buf[j])
                            buf[j] = item
            for j in rng.permutation(len(buf)):
                emit(buf[j])
        except Exception as e:  # surface loader errors in the main thread
            errors.append(e)
        out.put(None)

    t = threading.Thread(target=loader, name="dali-loader", daemon=True)
    t.start()
    steps, pixels, classes_per_batch = 0, 0, []
    while True:
        b = out.get()
        if b is None:
            break
        for slot, size, i in b:
            v = arena[slot, :size]
            assert v[0] == 0xFF and v[1] == 0xD8 and v[size - 2] == 0xFF and v[size - 1] == 0xD9
            h, w = jpeg_shape(v)
            pixels += h * w
        classes_per_batch.append(len(set(int(labels[i]) for _, _, i in b)))
        time.sleep(COMPUTE_S)
        for slot, _, _ in b:
            free.put(slot)
        steps += 1
    t.join()
    if errors:
        raise errors[0]
    print("dali_jpeg_preadv_arena_shufflebuf: %d steps, %.1f Mpixel peeked, mean classes "
          "per batch %.2f" % (steps, pixels / 1e6, float(np.mean(classes_per_batch))))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
