"""Language-model pre-training over bzip2-compressed JSON-lines shards streamed by a torch
IterableDataset in 2 DataLoader worker processes; each worker takes every 2nd shard of a
shuffled shard list and reads TWO of its shards at once, alternating documents between
the two open bz2 streams (a cycle-2 interleave, as shard-mixing loaders do), packs the
tokens into fixed 1024-token sequences and yields ready batches. A torch.save checkpoint
is written every 50 steps (the last 2 kept).

Data set (DATA/, about 6.1 MB on disk):
  DATA/vocab.txt                           8192 pseudo-words, one per line, read once by
                                           the main process (id = line number; 0 = EOS;
                                           60,753 bytes).
  DATA/shards/part-00000.jsonl.bz2 .. part-00007.jsonl.bz2
      8 bzip2 streams (compresslevel 9, 900 KB blocks), 1600 JSON lines each:
      {"id": N, "url": "...", "text": "w w w ..."}; document length in words lognormal
      (median 180, sigma 0.7, clipped to 16..2048), words Zipf-like (exponent 0.8) over
      the vocab (every word is in the vocab), 2.76-2.88 MB of text per shard,
      737,574-779,408 bytes compressed (6,041,217 in all).

Training: the main process reads vocab.txt and forks the DataLoader(ds, batch_size=None,
num_workers=2, prefetch_factor=4, fork, not persistent). One epoch (a single pass over the
corpus, as LM pre-training does). The shard list is permuted once (numpy rng seeded
4712: 4, 5, 1, 2, 0, 6, 3, 7); worker w takes shards perm[w::2] (4 shards) and opens
them two at a time with bz2.open(path, "rt"); it takes one document from stream A, one from stream B, ... and when
one stream ends it opens the next of its shards in its place. A document is json.loads'ed,
its words mapped to ids by dict lookup, an EOS (0) appended, and the ids appended to the
worker's token buffer, which is cut into sequences of 1025 tokens (input + shifted target,
no overlap: 1024 new tokens each); 8 sequences make a batch (a 8 x 1025 int64 tensor); a
worker's leftover tokens at its end are dropped. The main loop takes batches round-robin
from the 2 workers (a worker that ends drops out), sleeps 10 ms per step, and every 50
steps torch.save()s {"step", "emb" (8192 x 32 float32), "head"} to
DATA/ckpt/step_NNNNN.pt, deleting all but the newest 2. Steps are fixed by the data (see
--truth: 361, 181 from worker 0 and 180 from worker 1).

What a syscall trace sees (strace -f -e trace=openat,read,pread64,preadv,readv,lseek):
importing torch opens many .so/.py files and runs "/sbin/ldconfig -p" (not data). The main
process: vocab.txt openat, 2 lseek(0, SEEK_CUR), read(60754) = 60753, read(1) = 0, close;
it never opens a shard. The 2 forked worker processes (the only ones; not re-forked) each
open /dev/null and read a few torch .py sources at start-up (library noise), then do ALL
shard I/O, 4 shards each (worker 0: perm[0::2] = part-00004, 00001, 00000, 00003; worker
1: part-00005, 00002, 00006, 00007). A worker opens its first 2 shards back to back
(openat O_RDONLY|O_CLOEXEC, lseek(0, SEEK_CUR)) and keeps 2 open at all times; when one
ends (read(8192) = 0 on most shards; 1 of the 8 ends without the zero read), it is closed
and the next shard opened in its place. Every compressed byte is read exactly once,
strictly sequentially, in read(fd, 8192) calls (93-98 per shard, the last one short), no
pread, no seeking. The reads are NOT a steady stream: bzip2 decompresses whole 900 KB
blocks, so each stream is read in bursts of ~25-30 reads (~200-240 KB of compressed data,
one block) within ~15 ms, then nothing from that stream until the worker has consumed the
block's ~900 KB of text (~0.85 s here); a worker's 2 streams reach their block boundaries
at about the same time, so every ~0.85 s each worker reads ~4 bursts (~0.95 MB) and then
idles, both workers roughly in phase. Each shard file is about 3.2 blocks, so ~4 bursts
per shard (the last ~5-9 reads short of a full block). Total: 8 opens, ~758 reads + ~7 EOF
reads, 6,041,217 bytes, once. Checkpoints (main process): 7 torch.save calls (steps 50,
100, ..., 350) each openat(ckpt/step_NNNNN.pt, O_WRONLY|O_CREAT|O_TRUNC), 2 writev + 1
write (2,099,069 bytes), close; the older files are unlinked as newer ones appear
(step_00300.pt and step_00350.pt remain). Batches cross to the main process as shared-
memory tensors (socket/fd-passing chatter, not file I/O).

Usage: bz2_jsonl_interleave_workers.py DATA [--make | --truth]
needs torch (run with /opt/dlio-reference/venv/bin/python). Writes DATA/ckpt/.
"""
import bz2
import glob
import json
import os
import sys
import time

import numpy as np

N_SHARDS, DOCS_PER_SHARD, VOCAB = 8, 1600, 8192
WORD_MEDIAN, WORD_SIGMA, WORD_MIN, WORD_MAX = 180, 0.7, 16, 2048
SEQ, BATCH, WORKERS, PREFETCH, CYCLE = 1024, 8, 2, 4, 2
COMPUTE_S, CKPT_EVERY, CKPT_KEEP, EMB_DIM = 0.010, 50, 2, 32
SEED = 4711


def doc_lengths():
    rng = np.random.default_rng(SEED)
    return np.clip(rng.lognormal(np.log(WORD_MEDIAN), WORD_SIGMA, (N_SHARDS, DOCS_PER_SHARD)),
                   WORD_MIN, WORD_MAX).astype(np.int64)


def shard_perm():
    return np.random.default_rng(SEED + 1).permutation(N_SHARDS)


def interleave_order(shards, lens):
    """Document order of one worker: (shard, doc) pairs, cycle-2 interleave."""
    queue = list(shards)
    active = [[queue.pop(0), 0] for _ in range(min(CYCLE, len(queue)))]
    out, k = [], 0
    while active:
        k %= len(active)
        s = active[k]
        out.append((s[0], s[1]))
        s[1] += 1
        if s[1] == len(lens[s[0]]):
            if queue:
                active[k] = [queue.pop(0), 0]
                k += 1
            else:
                active.pop(k)
        else:
            k += 1
    return out


def worker_batches(w, lens):
    shards = [int(s) for s in shard_perm()[w::WORKERS]]
    tokens = sum(int(lens[s][d]) + 1 for s, d in interleave_order(shards, lens))
    return tokens // (SEQ + 1) // BATCH


def truth(data):
    lens = doc_lengths()
    per_worker = [worker_batches(w, lens) for w in range(WORKERS)]
    steps = sum(per_worker)
    files = sorted(glob.glob(os.path.join(data, "shards", "*.jsonl.bz2")))
    sizes = [os.path.getsize(f) for f in files] or None
    return {
        "program": "bz2_jsonl_interleave_workers", "needs": ["torch"],
        "format": "bzip2-compressed JSON lines (one document per line)",
        "io_library": "bz2.open(path, 'rt') line iteration inside a torch IterableDataset",
        "data_layout": "DATA/shards/part-0000K.jsonl.bz2 (8) + DATA/vocab.txt",
        "num_files": N_SHARDS, "samples_per_file": DOCS_PER_SHARD,
        "sample_size": {"distribution": "document words lognormal (median 180, sigma 0.7, "
                                        "clip 16-2048), ~7.5 text bytes per word",
                        "words_total": int(lens.sum()),
                        "compressed_file_bytes": sizes,
                        "compressed_total_bytes": 6041217},
        "batch_size": BATCH, "sequence_tokens": SEQ + 1,
        "readers": {"kind": "torch DataLoader worker processes (fork), IterableDataset, "
                            "shards split perm[w::2], 2 shards open per worker",
                    "count": WORKERS, "open_shards_per_worker": CYCLE},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": WORKERS * PREFETCH},
        "epochs": 1, "steps_per_epoch": steps, "total_steps": steps,
        "batches_per_worker": per_worker,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "shard order permuted once (numpy seed 4712); documents in file order, "
                   "interleaved across 2 open shards",
        "shard_order": [int(s) for s in shard_perm()],
        "eval": None,
        "checkpoint": {"every_steps": CKPT_EVERY, "library": "torch.save",
                       "dir": "DATA/ckpt", "keep": CKPT_KEEP,
                       "steps": list(range(CKPT_EVERY, steps + 1, CKPT_EVERY)),
                       "params": VOCAB * EMB_DIM + EMB_DIM * VOCAB},
        "side_files": [{"path": "vocab.txt", "reads": "once, main process"}],
        "read_pattern": "each shard read sequentially once, compressed bytes in 8 KiB "
                        "reads, in bursts of ~25-30 reads per 900 KB bz2 block; 2 shards "
                        "open per worker at a time",
        "bytes_per_epoch": sum(sizes) if sizes else 6041217,
    }


def make(data):
    sdir = os.path.join(data, "shards")
    os.makedirs(sdir, exist_ok=True)
    rng = np.random.default_rng(SEED + 100)
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    lp = 1.0 / np.arange(1, 27) ** 0.9
    lp /= lp.sum()
    words, seen = ["<eos>"], {"<eos>"}
    while len(words) < VOCAB:
        w = "".join(rng.choice(letters, int(rng.integers(2, 11)), p=lp))
        if w not in seen:
            seen.add(w)
            words.append(w)
    with open(os.path.join(data, "vocab.txt"), "w") as f:
        f.write("\n".join(words) + "\n")
    wp = 1.0 / np.arange(1, VOCAB) ** 0.8
    wp /= wp.sum()
    warr = np.array(words[1:])
    lens = doc_lengths()
    for s in range(N_SHARDS):
        ids = rng.choice(VOCAB - 1, int(lens[s].sum()), p=wp)
        text = warr[ids]
        lines, pos = [], 0
        for d in range(DOCS_PER_SHARD):
            n = int(lens[s][d])
            lines.append(json.dumps({"id": s * DOCS_PER_SHARD + d,
                                     "url": "https://example.org/%d/%d" % (s, d),
                                     "text": " ".join(text[pos:pos + n])}))
            pos += n
        with bz2.open(os.path.join(sdir, "part-%05d.jsonl.bz2" % s), "wt",
                      compresslevel=9) as f:
            f.write("\n".join(lines) + "\n")


def make_dataset(data, vocab):
    import torch
    from torch.utils.data import IterableDataset, get_worker_info

    class Bz2Stream(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            w = info.id if info else 0
            shards = [int(s) for s in shard_perm()[w::WORKERS]]
            queue = [os.path.join(data, "shards", "part-%05d.jsonl.bz2" % s) for s in shards]
            active = [bz2.open(queue.pop(0), "rt") for _ in range(min(CYCLE, len(queue)))]
            buf, k = [], 0
            while active:
                k %= len(active)
                line = active[k].readline()
                if not line:
                    active[k].close()
                    if queue:
                        active[k] = bz2.open(queue.pop(0), "rt")
                    else:
                        active.pop(k)
                    continue
                k += 1
                doc = json.loads(line)
                buf.extend([vocab[t] for t in doc["text"].split()])
                buf.append(0)
                need = BATCH * (SEQ + 1)
                while len(buf) >= need:
                    arr = np.array(buf[:need], dtype=np.int64).reshape(BATCH, SEQ + 1)
                    del buf[:need]
                    yield torch.from_numpy(arr)

    return Bz2Stream()


def train(data):
    import torch
    from torch.utils.data import DataLoader
    with open(os.path.join(data, "vocab.txt")) as f:
        vocab = {w: i for i, w in enumerate(f.read().split("\n")[:VOCAB])}
    ckdir = os.path.join(data, "ckpt")
    os.makedirs(ckdir, exist_ok=True)
    for old in glob.glob(os.path.join(ckdir, "step_*.pt")):
        os.remove(old)
    g = torch.Generator().manual_seed(SEED)
    state = {"emb": torch.randn(VOCAB, EMB_DIM, generator=g) * 0.02,
             "head": torch.randn(EMB_DIM, VOCAB, generator=g) * 0.02}
    loader = DataLoader(make_dataset(data, vocab), batch_size=None, num_workers=WORKERS,
                        prefetch_factor=PREFETCH, multiprocessing_context="fork")
    steps, ntok, saved = 0, 0, []
    for x in loader:
        assert x.shape == (BATCH, SEQ + 1) and int(x.max()) < VOCAB
        ntok += x.numel()
        time.sleep(COMPUTE_S)
        steps += 1
        if steps % CKPT_EVERY == 0:
            path = os.path.join(ckdir, "step_%05d.pt" % steps)
            torch.save(dict(state, step=steps), path)
            saved.append(path)
            while len(saved) > CKPT_KEEP:
                os.remove(saved.pop(0))
    print("bz2_jsonl_interleave_workers: %d steps, %d tokens, %d checkpoints kept"
          % (steps, ntok, len(saved)))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
