"""GPT-style pre-training on a packed token stream (llm.c / modded-nanogpt shard format):
a background thread reads the token shards as ONE continuous stream with unbuffered
readinto calls, cutting it into 16 x 1024-token micro-batches that span shard boundaries;
the main loop does gradient accumulation (4 micro-batches per optimizer step) and writes a
rotating pair of numpy checkpoints every 40 steps.

Data set (DATA/tokens/, about 27.6 MB):
  shard_000.bin .. shard_011.bin  each a 1024-byte header (256 int32: magic 20240520,
                  version 1, n_tokens) followed by n_tokens uint16 token ids (Zipf-like
                  values < 50257); n_tokens uniform 600k..1.8M (seed 5150): 713,658 ..
                  1,755,491 tokens, 1.43-3.51 MB per file, 13,806,395 tokens in all.
  index.json      shard names and token counts (750 bytes).
  DATA/ckpt/      created by training (see below).

Training: main thread reads index.json once, deletes any old DATA/ckpt/step_*.npz and
latest.txt (a fresh run), and builds 1M float32 parameters + Adam m, v in memory. Each epoch
it starts a new producer thread (threading.Thread) feeding a queue.Queue(maxsize=4). The
producer visits the 12 shards in a permuted order (seed 5151 + epoch: epoch 0 =
5,9,11,3,8,4,7,1,2,6,0,10; epoch 1 = 8,2,9,1,5,6,11,0,10,4,3,7): it opens a shard with
open(path, "rb", buffering=0), reads and checks the header, and fills each micro-batch
buffer (16385 tokens: the carried-over last token of the previous micro-batch + 16384 new
tokens) with readinto; when the shard runs out mid-buffer it reads the tail, closes it,
opens the next shard and continues. 840 micro-batches per epoch (the last 43,834 tokens,
88 KB, of the stream are never read), 210 optimizer steps. The main thread sleeps 4 ms per
micro-batch and 2 ms per optimizer step (18 ms per step). Every 40 optimizer steps (global
steps 40, 80, ..., 400: 10 checkpoints) it writes DATA/ckpt/step_NNNNNN.npz.tmp with
np.savez (params, adam_m, adam_v: 4 MB each, plus step), os.replace()s it to .npz,
rewrites latest.txt, and deletes all but the newest 2 .npz. 2 epochs, 420 steps. No eval.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek,write): token I/O
only in the producer thread (a new TID each epoch), plain read() on an unbuffered fd (no
lseek, no pread): per shard openat(O_RDONLY|O_CLOEXEC), read(1024) header, then
read(32768) after read(32768) at consecutive offsets, each issued when the consumer frees
a queue slot (one every ~4-5 ms: the reads are paced by training, 4 micro-batches ahead);
at each shard boundary the 32768 bytes are split into a short tail read of shard A, close,
openat of shard B, read(1024), and a short head read of shard B (so the 32 KiB reads in
B are no longer 1024-aligned). The very first read of each epoch is read(2) (the carry
token). The last shard of each epoch is only partly read (shard_010: 1,366,566 of
1,454,234 bytes; epoch 1 shard_007: 1,623,052 of 1,710,720), then closed. Each shard is
opened once per epoch; 27,537,410 bytes read per epoch (12 headers + 840 x 32 KiB + 2).
Main thread: index.json read once (read(751) = 750, read(1) = 0). Per checkpoint (main
thread, producer blocked on the full queue meanwhile): openat(step_N.npz.tmp,
O_WRONLY|O_CREAT|O_TRUNC), for each 4 MB array write(188) (zip local header + .npy
header), write(4000000), lseek back and write(60) (header rewrite), lseek forward; then
the scalar (write(194), write(58)), the central directory write(244): 12,001,240 bytes in
12 writes + 25 lseeks, close; rename(.tmp -> .npz); latest.txt opened O_TRUNC, one
write(16); from the 3rd checkpoint on an unlink() of the oldest .npz. 120 MB written in
all, 2 checkpoints (24 MB) left on disk.

Usage: packed_tokens_stream_ckpt.py DATA [--make | --truth]
numpy + stdlib only (runs with plain python3). Writes DATA/ckpt/.
"""
import glob
import json
import os
import queue
import sys
import threading
import time

import numpy as np

N_SHARDS, MIN_TOK, MAX_TOK, VOCAB = 12, 600_000, 1_800_000, 50257
HEADER_INTS, MAGIC, VERSION = 256, 20240520, 1
MICRO_B, SEQ_LEN, ACCUM, EPOCHS = 16, 1024, 4, 2
MICRO_S, OPT_S = 0.004, 0.002
QUEUE_DEPTH, CKPT_EVERY, CKPT_KEEP, N_PARAMS = 4, 40, 2, 1_000_000
SEED = 5150
TOK_PER_MICRO = MICRO_B * SEQ_LEN


def shard_tokens():
    rng = np.random.default_rng(SEED)
    return rng.integers(MIN_TOK, MAX_TOK + 1, N_SHARDS)


def shard_order(epoch):
    return np.random.default_rng(SEED + 1 + epoch).permutation(N_SHARDS)


def micro_per_epoch():
    # one extra token is needed beyond the last micro-batch (the shifted target)
    return (int(shard_tokens().sum()) - 1) // TOK_PER_MICRO


def steps_per_epoch():
    return micro_per_epoch() // ACCUM


def ckpt_steps():
    steps = []
    done = 0
    for _ in range(EPOCHS):
        for _ in range(steps_per_epoch()):
            done += 1
            if done % CKPT_EVERY == 0:
                steps.append(done)
    return steps


def truth(data):
    toks = shard_tokens()
    spe = steps_per_epoch()
    used = (spe * ACCUM * TOK_PER_MICRO + 1) * 2
    return {
        "program": "packed_tokens_stream_ckpt", "needs": [],
        "format": "llm.c-style token shards: 1024-byte header (256 int32: magic 20240520, "
                  "version 1, n_tokens) + uint16 tokens",
        "io_library": "unbuffered open(..., buffering=0) + readinto in a background thread",
        "data_layout": "DATA/tokens/index.json + DATA/tokens/shard_000..011.bin; "
                       "DATA/ckpt/ (written)",
        "num_files": N_SHARDS, "samples_per_file": "variable (packed stream, no sample "
                                                   "boundaries)",
        "sample_size": {"dist": "fixed micro-batch of 16 x 1024 tokens",
                        "bytes_per_micro_batch": TOK_PER_MICRO * 2,
                        "shard_tokens_min": int(toks.min()), "shard_tokens_max": int(toks.max()),
                        "total_tokens": int(toks.sum()),
                        "total_bytes": int(toks.sum()) * 2 + N_SHARDS * HEADER_INTS * 4},
        "batch_size": {"micro_batch_sequences": MICRO_B, "seq_len": SEQ_LEN,
                       "grad_accum": ACCUM, "tokens_per_step": ACCUM * TOK_PER_MICRO},
        "readers": {"kind": "thread", "count": 1,
                    "note": "one producer thread per epoch fills a queue.Queue"},
        "prefetch": {"kind": "bounded queue", "micro_batches": QUEUE_DEPTH},
        "epochs": EPOCHS, "steps_per_epoch": spe, "total_steps": EPOCHS * spe,
        "micro_batches_per_epoch": spe * ACCUM,
        "compute_s_per_step": ACCUM * MICRO_S + OPT_S,
        "shuffle": "shard order permuted per epoch (seed 5151 + epoch); tokens sequential "
                   "within and across shards (packed, sequences span shard boundaries)",
        "eval": None,
        "checkpoint": {"every_steps": CKPT_EVERY, "at_steps": ckpt_steps(),
                       "format": "np.savez (uncompressed zip) of params + Adam m + v, float32",
                       "bytes_approx": 3 * N_PARAMS * 4, "keep_last": CKPT_KEEP,
                       "path": "DATA/ckpt/step_NNNNNN.npz (written as .tmp, os.replace), "
                               "DATA/ckpt/latest.txt rewritten",
                       "writer": "main thread"},
        "side_files": [{"path": "tokens/index.json", "reads": "once"},
                       {"path": "ckpt/", "note": "old *.npz/latest.txt removed at start"}],
        "read_pattern": "per shard: read(1024) header, then consecutive readinto of 32768 "
                        "bytes (16384 tokens) at ascending offsets; at a shard boundary the "
                        "read is split (short tail read of shard A, header + head read of "
                        "shard B); shards visited in a per-epoch permuted order",
        "bytes_per_epoch": used + N_SHARDS * HEADER_INTS * 4,
        "bytes_written": len(ckpt_steps()) * 12_001_240,
    }


def make(data):
    d = os.path.join(data, "tokens")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(SEED + 100)
    index = []
    for k, n in enumerate(shard_tokens()):
        # Zipf-like token ids, as real BPE streams are
        toks = np.minimum(rng.zipf(1.2, int(n)) - 1, VOCAB - 1).astype(np.uint16)
        header = np.zeros(HEADER_INTS, dtype=np.int32)
        header[:3] = (MAGIC, VERSION, int(n))
        name = "shard_%03d.bin" % k
        with open(os.path.join(d, name), "wb") as f:
            f.write(header.tobytes())
            f.write(toks.tobytes())
        index.append({"file": name, "tokens": int(n)})
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump({"vocab_size": VOCAB, "dtype": "uint16", "shards": index}, f, indent=1)


class TokenStream:
    """Reads the shards as one packed token stream; crosses shard boundaries."""

    def __init__(self, tok_dir, shards, order):
        self.dir, self.shards, self.order = tok_dir, shards, list(order)
        self.f, self.left = None, 0

    def _next_shard(self):
        if self.f is not None:
            self.f.close()
        if not self.order:
            self.f = None
            return False
        info = self.shards[self.order.pop(0)]
        self.f = open(os.path.join(self.dir, info["file"]), "rb", buffering=0)
        header = np.frombuffer(self.f.read(HEADER_INTS * 4), dtype=np.int32)
        assert header[0] == MAGIC and header[1] == VERSION and header[2] == info["tokens"]
        self.left = int(header[2])
        return True

    def read_into(self, out):
        """Fill out (uint16) with the next len(out) tokens; False if the stream ran dry."""
        pos = 0
        while pos < len(out):
            if self.left == 0 and not self._next_shard():
                return False
            n = min(len(out) - pos, self.left)
            got = self.f.readinto(memoryview(out[pos:pos + n]).cast("B"))
            assert got == 2 * n
            pos += n
            self.left -= n
        return True

    def close(self):
        if self.f is not None:
            self.f.close()


def producer(tok_dir, shards, epoch, q):
    stream = TokenStream(tok_dir, shards, shard_order(epoch))
    carry = np.zeros(1, dtype=np.uint16)
    assert stream.read_into(carry)
    for _ in range(steps_per_epoch() * ACCUM):
        buf = np.empty(TOK_PER_MICRO + 1, dtype=np.uint16)
        buf[0] = carry[0]
        assert stream.read_into(buf[1:])
        carry[0] = buf[-1]
        q.put(buf)
    stream.close()
    q.put(None)


def save_ckpt(ckpt_dir, step, params, m, v):
    path = os.path.join(ckpt_dir, "step_%06d.npz" % step)
    with open(path + ".tmp", "wb") as f:
        np.savez(f, params=params, adam_m=m, adam_v=v, step=np.array(step))
    os.replace(path + ".tmp", path)
    with open(os.path.join(ckpt_dir, "latest.txt"), "w") as f:
        f.write(os.path.basename(path) + "\n")
    old = sorted(glob.glob(os.path.join(ckpt_dir, "step_*.npz")))[:-CKPT_KEEP]
    for p in old:
        os.remove(p)


def train(data):
    tok_dir = os.path.join(data, "tokens")
    with open(os.path.join(tok_dir, "index.json")) as f:
        shards = json.load(f)["shards"]
    assert len(shards) == N_SHARDS
    ckpt_dir = os.path.join(data, "ckpt")
    os.makedirs(ckpt_dir, exist_ok=True)
    for p in glob.glob(os.path.join(ckpt_dir, "step_*.npz*")) + \
            glob.glob(os.path.join(ckpt_dir, "latest.txt")):
        os.remove(p)
    rng = np.random.default_rng(SEED + 200)
    params = rng.standard_normal(N_PARAMS, dtype=np.float32) * 0.02
    m = np.zeros_like(params)
    v = np.zeros_like(params)
    t0, step, n_tok = time.time(), 0, 0
    for epoch in range(EPOCHS):
        q = queue.Queue(maxsize=QUEUE_DEPTH)
        th = threading.Thread(target=producer, args=(tok_dir, shards, epoch, q), daemon=True)
        th.start()
        done = False
        while not done:
            for _ in range(ACCUM):
                buf = q.get()
                if buf is None:
                    done = True
                    break
                x = buf[:-1].reshape(MICRO_B, SEQ_LEN)
                y = buf[1:].reshape(MICRO_B, SEQ_LEN)
                assert x.shape == y.shape
                n_tok += x.size
                time.sleep(MICRO_S)
            if done:
                break
            time.sleep(OPT_S)
            m[:1024] += 1e-3
            step += 1
            if step % CKPT_EVERY == 0:
                save_ckpt(ckpt_dir, step, params, m, v)
        th.join()
    assert step == EPOCHS * steps_per_epoch()
    print("packed_tokens_stream_ckpt: %d steps, %d tokens, %d epochs, %.1f s"
          % (step, n_tok, EPOCHS, time.time() - t0))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
