"""LM-pretraining style text stream: gzip-compressed JSON-lines shards are streamed line by
line with gzip.open (no random access), documents tokenized with a vocab lookup, passed
through a 256-document shuffle buffer, and packed into batches by a TOKEN budget; the
trainer appends a metrics line to a log file every 25 steps and writes a small resume
state file (write temp + os.replace) at the end of each epoch.

Data set (DATA/, about 2.3 MB on disk):
  DATA/vocab.txt                         8000 pseudo-words, one per line (~62 KB), read once;
  DATA/shards/part-00000.jsonl.gz .. part-00005.jsonl.gz
      6 gzip files, 1200 JSON lines each: {"id": ..., "source": ..., "text": "w w w ..."};
      document length in words is lognormal (median 100, sigma 0.8, clipped to 8..1024),
      words Zipf-like over the vocab plus ~2% out-of-vocabulary words; a line is ~7.9
      bytes per word (~1.07 KB per document), a shard about 1.29 MB of text and
      0.36-0.39 MB compressed (2.26 MB for the 6 shards).
  DATA/logs/ (written by training): train_log.jsonl, state.json.

Training (main thread only, no workers, no prefetch): vocab.txt is read once. Each epoch
the 6 shards are visited in a permuted order (numpy rng seeded 5150 + epoch); each shard
is opened with gzip.open(path, "rt") and iterated line by line (json.loads, text.split(),
dict lookup, truncation to 512 tokens). Documents go through a 256-slot shuffle buffer
(rng seeded 5150 + 100*epoch; the buffer spans shard boundaries and is flushed in random
order at the end of the epoch), then are packed greedily into batches of at most 6144
tokens (a batch closes when the next document would exceed the budget; the last partial
batch of an epoch is kept), so batch sizes vary (23-60 documents, 45 on average). The
number of steps per epoch is fixed by the data (see --truth: 160 per epoch, 320 in all).
2 epochs, 8 ms sleep per step. Every 25 steps one JSON line (~71 bytes) is appended to DATA/logs/train_log.jsonl
(open "a", write, close); after each epoch DATA/logs/state.json.tmp is written (~97
bytes) and os.replace()d onto DATA/logs/state.json. No eval, no model checkpoint.

What a syscall trace sees (strace -f -e trace=openat,read,write,lseek,rename): one
process, one thread. vocab.txt: one openat, read(8192) x 9 (8 full, one of 914 bytes) and
a read returning 0. Each shard: openat(part-0000K.jsonl.gz, O_RDONLY|O_CLOEXEC) once per
epoch (12 opens in all, one shard open at a time), then the compressed file is read
strictly sequentially, front to back, in read(fd, 4096) calls (the buffered file under
GzipFile; 90-97 full or short reads per shard plus 3 reads returning 0 at EOF, 94-100
read calls per shard); decompression and line splitting happen in memory, so there is no
per-document syscall: reads come in a slow steady stream paced by tokenization and the
8 ms steps (one 4 KiB compressed read carries ~14 KB of text, about 13 documents). A
shard is read completely before the next one is opened. Each epoch reads every compressed
byte exactly once (2.26 MB, 4.5 MB over the run). Writes: DATA/logs/train_log.jsonl
opened (O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC) every 25 steps for one write(71) and closed
(12 times over the run); state.json.tmp opened O_WRONLY|O_CREAT|O_TRUNC, one write(97),
closed, then rename()d onto state.json (twice). Both log files are removed at the start
of a run if present.

Usage: jsonl_gz_stream_token_budget.py DATA [--make | --truth]
numpy only (runs with plain python3).
"""
import gzip
import json
import os
import sys
import time

import numpy as np

SHARDS, DOCS, VOCAB = 6, 1200, 8000
MAX_LEN, TOKEN_BUDGET, SHUF_BUF, EPOCHS, COMPUTE_S, LOG_EVERY = 512, 6144, 256, 2, 0.008, 25
SEED = 5150
UNK, PAD = 1, 0


def shard_path(data, k):
    return os.path.join(data, "shards", "part-%05d.jsonl.gz" % k)


def doc_lengths(k):
    rng = np.random.default_rng(SEED + 10 * k)
    return np.clip(rng.lognormal(np.log(100), 0.8, DOCS), 8, 1024).astype(np.int64)


def shard_order(epoch):
    return [int(k) for k in np.random.default_rng(SEED + epoch).permutation(SHARDS)]


def shuffle_buffer(items, size, rng):
    buf = []
    for it in items:
        if len(buf) < size:
            buf.append(it)
            continue
        j = int(rng.integers(size))
        yield buf[j]
        buf[j] = it
    for j in rng.permutation(len(buf)):
        yield buf[j]


def pack(lengths_stream):
    """Greedy token-budget packing over (item, ntokens) pairs; yields lists of items."""
    cur, tot = [], 0
    for item, n in lengths_stream:
        if cur and tot + n > TOKEN_BUDGET:
            yield cur
            cur, tot = [], 0
        cur.append(item)
        tot += n
    if cur:
        yield cur


def planned_batches(epoch):
    def lens():
        for k in shard_order(epoch):
            for n in doc_lengths(k):
                yield min(int(n), MAX_LEN)
    rng = np.random.default_rng(SEED + 100 * epoch)
    return [len(b) for b in pack((n, n) for n in shuffle_buffer(lens(), SHUF_BUF, rng))]


def truth(data):
    per_epoch = [planned_batches(e) for e in range(EPOCHS)]
    steps = [len(b) for b in per_epoch]
    all_b = [x for b in per_epoch for x in b]
    files = [shard_path(data, k) for k in range(SHARDS)]
    gz = sum(os.path.getsize(f) for f in files) if all(map(os.path.exists, files)) else None
    words = np.concatenate([doc_lengths(k) for k in range(SHARDS)])
    total = sum(steps)
    return {
        "program": "jsonl_gz_stream_token_budget", "needs": [],
        "format": "gzip-compressed JSON lines (one document per line)",
        "io_library": "gzip.open(..., 'rt') line iteration, main thread",
        "data_layout": "DATA/shards/part-0000K.jsonl.gz (6), DATA/vocab.txt",
        "num_files": SHARDS, "samples_per_file": DOCS,
        "sample_size": {"dist": "lognormal", "unit": "words", "median": 100, "sigma": 0.8,
                        "min": 8, "max": 1024, "mean_words": round(float(words.mean()), 1),
                        "bytes_per_word_approx": 7.9, "truncate_tokens": MAX_LEN},
        "compressed_bytes_total": gz,
        "batch_size": {"kind": "token budget", "max_tokens": TOKEN_BUDGET,
                       "docs_min": min(all_b), "docs_max": max(all_b),
                       "docs_mean": round(float(np.mean(all_b)), 2)},
        "readers": {"kind": "main thread", "count": 1},
        "prefetch": None,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": total,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "shard order permuted per epoch (seed 5150 + epoch) + 256-document "
                   "shuffle buffer (seed 5150 + 100*epoch); files read sequentially",
        "eval": None, "checkpoint": {"kind": "resume state json (temp + os.replace)",
                                     "path": "logs/state.json", "when": "end of each epoch",
                                     "count": EPOCHS},
        "side_files": [{"path": "vocab.txt", "reads": "once"},
                       {"path": "logs/train_log.jsonl", "writes": "append every %d steps"
                        % LOG_EVERY, "count": total // LOG_EVERY}],
        "file_opens": {"data_per_epoch": SHARDS, "total_data": SHARDS * EPOCHS},
        "read_pattern": "each .jsonl.gz streamed front to back in 4 KiB reads, one shard "
                        "at a time in a shuffled shard order; no per-document syscalls",
        "reads_per_sample": "about 0.08 (4 KiB compressed reads, ~13 documents each)",
    }


def make(data):
    os.makedirs(os.path.join(data, "shards"), exist_ok=True)
    rng = np.random.default_rng(SEED)
    syl = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "de", "fo", "gi"]
    vocab, seen = [], set()
    while len(vocab) < VOCAB:
        w = "".join(syl[i] for i in rng.integers(0, len(syl), int(rng.integers(2, 5))))
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    with open(os.path.join(data, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    vocab = np.array(vocab)
    zipf = 1.0 / np.arange(1, VOCAB + 1) ** 0.9
    zipf /= zipf.sum()
    sources = ["web", "books", "wiki", "code"]
    for k in range(SHARDS):
        lens = doc_lengths(k)
        with gzip.open(shard_path(data, k), "wt", compresslevel=6) as f:
            for i, n in enumerate(lens):
                words = vocab[rng.choice(VOCAB, int(n), p=zipf)]
                oov = rng.random(int(n)) < 0.02
                words[oov] = "xx" + words[oov]
                doc = {"id": "%d-%05d" % (k, i), "source": sources[i % 4],
                       "text": " ".join(words)}
                f.write(json.dumps(doc) + "\n")


def train(data):
    with open(os.path.join(data, "vocab.txt")) as f:
        vocab = {w.rstrip("\n"): i + 2 for i, w in enumerate(f)}
    logdir = os.path.join(data, "logs")
    os.makedirs(logdir, exist_ok=True)
    for name in ("train_log.jsonl", "state.json"):
        if os.path.exists(os.path.join(logdir, name)):
            os.remove(os.path.join(logdir, name))

    def docs(order):
        for k in order:
            with gzip.open(shard_path(data, k), "rt") as f:
                for line in f:
                    d = json.loads(line)
                    ids = [vocab.get(w, UNK) for w in d["text"].split()][:MAX_LEN]
                    yield ids

    step = 0
    t0 = time.time()
    for epoch in range(EPOCHS):
        order = shard_order(epoch)
        rng = np.random.default_rng(SEED + 100 * epoch)
        stream = ((ids, len(ids)) for ids in shuffle_buffer(docs(order), SHUF_BUF, rng))
        n = 0
        plan = planned_batches(epoch)
        for batch in pack(stream):
            longest = max(len(x) for x in batch)
            arr = np.full((len(batch), longest), PAD, dtype=np.int32)
            for r, ids in enumerate(batch):
                arr[r, :len(ids)] = ids
            assert len(batch) == plan[n]
            time.sleep(COMPUTE_S)
            n += 1
            step += 1
            if step % LOG_EVERY == 0:
                with open(os.path.join(logdir, "train_log.jsonl"), "a") as lf:
                    lf.write(json.dumps({"step": step, "epoch": epoch, "docs": len(batch),
                                         "tokens": int((arr != PAD).sum()),
                                         "elapsed": round(time.time() - t0, 3)}) + "\n")
        assert n == len(plan)
        tmp = os.path.join(logdir, "state.json.tmp")
        with open(tmp, "w") as sf:
            json.dump({"epoch": epoch + 1, "step": step, "shard_order": order,
                       "tokens_budget": TOKEN_BUDGET, "seed": SEED}, sf)
        os.replace(tmp, os.path.join(logdir, "state.json"))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
