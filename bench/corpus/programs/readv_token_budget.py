"""Length-bucketed, token-budget batches of variable-length records, each read with lseek + readv.

DATA/records.bin packs 320 records back to back (586 KB): each a 16-byte header (magic
"REC1", id, ntokens, label as 4 little-endian uint32) followed by ntokens int32 tokens,
ntokens lognormal (median 384, sigma 0.7, clipped to [32, 2048]), so records are 272 to
8208 bytes (mean 1830). DATA/index.json (4 KB) holds every record's offset and ntokens; it
is read once at the start. No framework, main thread only. Batches are NOT of fixed size:
each epoch (one random.Random(777) for the run) shuffles the 320 ids, cuts them into
mega-batches of 64, sorts each mega-batch longest first and packs it greedily into batches
whose padded size (count x longest) stays within 6144 tokens, then shuffles the batch
order. That gives 32 batches in epoch 1 and 34 in epoch 2, of 3 to 22 records (mean 9.7),
long records in small batches and short ones in big batches; every record is read exactly
once per epoch. Each record is read with os.lseek(fd, offset, SEEK_SET) then ONE
os.readv(fd, [header 16 bytes, payload 4 x ntokens bytes]) into two buffers allocated once
(a 16-byte bytearray and a memoryview slice of an 8 KiB bytearray), then copied into a
zero-padded batch array. Compute per step: sleep 6 ms + 1 us per padded token (6.4 to
12.1 ms, mean 11.2 ms). 2 epochs, 66 steps.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write,mmap),
all on the main thread: index.json: openat, fstat, 2 lseeks, one 4142-byte read (4141
returned), a 1-byte read at EOF, close. Then ONE openat of records.bin (os.open, kept for
the whole run, closed at the end), and per sample exactly two calls: lseek(fd, off,
SEEK_SET) and readv(fd, [{16}, {4 x ntokens}]) returning 16 + 4 x ntokens (the two iovecs
are contiguous in the file: one record, never a partial one). No read/pread on the data
file. Per step a burst of 3 to 22 lseek+readv pairs at scattered offsets in the order of
decreasing record length, then the compute sleep. 640 readv calls, 2 x 585748 bytes.
No writes to files.

Usage: readv_token_budget.py DATA [--make | --truth]
Fixed by the program: 1 record file of 320 variable-length records + a JSON index, batches
of variable size under a 6144-token budget, main thread, 2 epochs of 32 and 34 steps, 6-12
ms compute per step, no prefetch, no checkpoint, no eval. Needs numpy only.
"""
import json
import os
import random
import struct
import sys
import time

import numpy as np

RECORDS, MEDIAN_TOK, SIGMA, LO_TOK, HI_TOK = 320, 384, 0.7, 32, 2048
HDR = struct.Struct("<IIII")  # magic, id, ntokens, label
MAGIC = 0x31434552  # b"REC1"
TOKEN_BUDGET, MEGA, EPOCHS = 6144, 64, 2
BASE_S, PER_TOKEN_S = 0.006, 1e-6
SEED = 777


def token_counts():
    rng = np.random.default_rng(SEED)
    return np.clip(rng.lognormal(np.log(MEDIAN_TOK), SIGMA, RECORDS), LO_TOK, HI_TOK) \
        .astype(np.int64).tolist()


def plan(lengths):
    """Per epoch, the list of batches (lists of record ids), as train() uses them."""
    rng = random.Random(SEED)
    epochs = []
    for _ in range(EPOCHS):
        ids = list(range(len(lengths)))
        rng.shuffle(ids)
        batches = []
        for c in range(0, len(ids), MEGA):
            chunk = sorted(ids[c:c + MEGA], key=lambda i: -lengths[i])
            cur = []
            for i in chunk:
                # the chunk is sorted longest first, so cur[0] is the padded length
                if cur and (len(cur) + 1) * lengths[cur[0]] > TOKEN_BUDGET:
                    batches.append(cur)
                    cur = []
                cur.append(i)
            batches.append(cur)
        rng.shuffle(batches)
        epochs.append(batches)
    return epochs


def compute_s(batch, lengths):
    return BASE_S + PER_TOKEN_S * len(batch) * lengths[batch[0]]


def truth(data):
    lengths = token_counts()
    epochs = plan(lengths)
    rec = [HDR.size + 4 * n for n in lengths]
    steps = [len(e) for e in epochs]
    sizes = [len(b) for e in epochs for b in e]
    comp = [compute_s(b, lengths) for e in epochs for b in e]
    p = os.path.join(data, "records.bin")
    return {
        "program": "readv_token_budget", "needs": [],
        "format": "custom record file: 16-byte header (magic, id, ntokens, label) + int32 "
                  "tokens, plus a JSON index",
        "io_library": "os.lseek + os.readv into two preallocated buffers (header, payload)",
        "data_layout": "DATA/records.bin, DATA/index.json",
        "num_files": 1, "samples_per_file": RECORDS,
        "sample_size": {"dist": "lognormal (tokens x 4 bytes + 16)", "median_tokens": MEDIAN_TOK,
                        "sigma": SIGMA, "clip_tokens": [LO_TOK, HI_TOK],
                        "mean": float(np.mean(rec)), "min": min(rec), "max": max(rec)},
        "file_size": os.path.getsize(p) if os.path.exists(p) else sum(rec),
        "batch_size": {"dist": "variable (token budget)", "token_budget": TOKEN_BUDGET,
                       "mean": float(np.mean(sizes)), "min": min(sizes), "max": max(sizes)},
        "readers": {"kind": "main", "count": 1},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": sum(steps),
        "compute_s_per_step": {"formula": "0.006 + 1e-6 * batch_len * max_tokens_in_batch",
                               "mean": float(np.mean(comp)), "min": min(comp),
                               "max": max(comp)},
        "shuffle": "per epoch: shuffle all ids, cut into mega-batches of 64, sort each by "
                   "length (longest first), pack greedily under a 6144 padded-token budget, "
                   "then shuffle the batch order (random.Random(777))",
        "eval": None, "checkpoint": None,
        "side_files": [{"name": "index.json", "reads": 1, "when": "start"}],
        "read_pattern": "per sample one lseek(SEEK_SET) + one readv of 2 iovecs (16 + 4*n "
                        "bytes) at the record's offset; each record read exactly once per "
                        "epoch, batches hold records of similar length",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    lengths = token_counts()
    offsets, off = [], 0
    with open(os.path.join(data, "records.bin"), "wb") as f:
        for i, n in enumerate(lengths):
            rng = np.random.default_rng(SEED + 1 + i)
            f.write(HDR.pack(MAGIC, i, n, int(rng.integers(0, 5))))
            f.write(rng.integers(0, 32000, n, dtype=np.int32).tobytes())
            offsets.append(off)
            off += HDR.size + 4 * n
    with open(os.path.join(data, "index.json"), "w") as f:
        json.dump({"offsets": offsets, "ntokens": lengths, "header_bytes": HDR.size}, f)


def train(data):
    with open(os.path.join(data, "index.json")) as f:
        index = json.load(f)
    offsets, lengths = index["offsets"], index["ntokens"]
    hdr = bytearray(HDR.size)
    payload = bytearray(4 * max(lengths))
    view = memoryview(payload)
    fd = os.open(os.path.join(data, "records.bin"), os.O_RDONLY)
    try:
        for batches in plan(lengths):
            for batch in batches:
                width = lengths[batch[0]]
                x = np.zeros((len(batch), width), dtype=np.int32)
                for row, i in enumerate(batch):
                    n = lengths[i]
                    os.lseek(fd, offsets[i], os.SEEK_SET)
                    got = os.readv(fd, [hdr, view[:4 * n]])
                    magic, rid, ntok, _ = HDR.unpack(hdr)
                    assert got == HDR.size + 4 * n and magic == MAGIC and rid == i and ntok == n
                    x[row, :n] = np.frombuffer(payload, dtype=np.int32, count=n)
                time.sleep(compute_s(batch, lengths))
    finally:
        os.close(fd)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
