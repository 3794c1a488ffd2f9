"""A JSON-lines corpus re-read whole with readlines() at every epoch, then trained from memory.

DATA/corpus.jsonl holds about 20 MB of JSON lines, each {"id": int, "text": words} with the
words drawn from a vocabulary of 2000 random lowercase words (3 to 10 letters) and the word
count lognormal (median 100, sigma 0.5, clipped to [8, 1000]); DATA/vocab.txt lists the
vocabulary, one word a line, and is read once before training (into a dict word -> id).
Every epoch opens the corpus (text mode, utf-8) and reads all of it with f.readlines() (a
preload per epoch: nothing is kept from the epoch before), shuffles the lines in memory
(one random.Random for the run), then trains from memory: batches of 64 lines, each line
json.loads-ed and its first 32 words looked up in the vocabulary, then 5 ms of sleep as
compute per batch (the last partial batch is dropped). Main thread only, 3 epochs.

What a syscall trace sees, all on the main thread: at start vocab.txt (openat, fstat,
ioctl(TCGETS) (fails), lseek, reads of 8192 and 6660 bytes, an empty read, close). Then at
each epoch's start one openat of corpus.jsonl with the same fstat, ioctl and lseek, and
strictly sequential reads of 8192 bytes (the text layer's chunk size) through the whole
file: 2441 of 8192, one short read of 7022 and an empty read (2443 reads, 20003694 bytes),
back to back in about 0.1 s (0.3 s in the first epoch under strace), close. Then 360 steps
with no I/O at all (about 2.1 s: 5 ms of sleep plus the json parsing per step) until the
next epoch's burst. 3 bursts, 60011082 bytes of corpus read in all. No lseek past the
first, no pread, no writes.

Usage: jsonl_epoch_preload.py DATA [--make | --truth]
Fixed by the program: 1 corpus file of 23100 lines (about 20 MB) + vocab.txt, the whole
file read once per epoch, batch 64 lines, main thread only, 3 epochs of 360 steps (60 lines
dropped per epoch), 5 ms compute per step, lines shuffled in memory per epoch, no
checkpoint, no eval. stdlib only (numpy for --make).
"""
import json
import os
import random
import sys
import time

import numpy as np

LINES, VOCAB, BATCH, EPOCHS, COMPUTE_S, LOOKUP = 23100, 2000, 64, 3, 0.005, 32
MEDIAN_WORDS, SIGMA, LO, HI = 100, 0.5, 8, 1000
SEED = 5150


def truth(data):
    corpus, vocab = os.path.join(data, "corpus.jsonl"), os.path.join(data, "vocab.txt")
    size = os.path.getsize(corpus) if os.path.exists(corpus) else None
    steps = LINES // BATCH
    return {
        "program": "jsonl_epoch_preload", "needs": [], "format": "jsonl (text)",
        "io_library": "open(text, utf-8).readlines() once per epoch",
        "data_layout": "DATA/corpus.jsonl, DATA/vocab.txt", "num_files": 1,
        "samples_per_file": LINES,
        "sample_size": {"dist": "lognormal words per line", "median_words": MEDIAN_WORDS,
                        "sigma": SIGMA, "clip_words": [LO, HI],
                        "mean_bytes": size / LINES if size else None},
        "file_size": {"bytes": size},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0},
        "prefetch": "whole file preloaded at the start of every epoch",
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S, "shuffle": "lines in memory, per epoch",
        "eval": None, "checkpoint": None,
        "side_files": [{"name": "vocab.txt", "reads": 1, "when": "before training",
                        "bytes": os.path.getsize(vocab) if os.path.exists(vocab) else None}],
        "read_pattern": "sequential read of the whole corpus at each epoch's start (a burst), "
                        "then no I/O during the epoch's steps",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words, seen = [], set()
    while len(words) < VOCAB:
        w = "".join(rng.choice(letters, int(rng.integers(3, 11))))
        if w not in seen:
            seen.add(w)
            words.append(w)
    with open(os.path.join(data, "vocab.txt"), "w") as f:
        f.write("\n".join(words) + "\n")
    counts = np.clip(rng.lognormal(np.log(MEDIAN_WORDS), SIGMA, LINES), LO, HI).astype(int)
    with open(os.path.join(data, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for i, n in enumerate(counts):
            ids = rng.integers(0, VOCAB, int(n))
            f.write(json.dumps({"id": i, "text": " ".join(words[k] for k in ids)}) + "\n")


def train(data):
    with open(os.path.join(data, "vocab.txt"), encoding="utf-8") as f:
        vocab = {w.strip(): i for i, w in enumerate(f)}
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        with open(os.path.join(data, "corpus.jsonl"), encoding="utf-8") as f:
            lines = f.readlines()
        rng.shuffle(lines)
        for s in range(len(lines) // BATCH):
            batch = [json.loads(x) for x in lines[s * BATCH:(s + 1) * BATCH]]
            tokens = [[vocab.get(w, 0) for w in b["text"].split(" ", LOOKUP)[:LOOKUP]]
                      for b in batch]
            assert len(tokens) == BATCH
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
