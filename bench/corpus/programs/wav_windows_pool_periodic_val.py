"""Keyword-spotting / speaker-embedding style training on random 1-second windows cut from
16 kHz mono WAV files with the standard-library `wave` module, loaded by a
multiprocessing.Pool of 2 worker processes one batch ahead (map_async), with a
validation pass every 20 steps that streams every file of a separate val/ folder whole,
in 4000-frame pieces, in the main process.

Data set (DATA/, about 11 MB):
  DATA/train/spk{S}_utt{U}.wav   64 files (16 speakers x 4 utterances), PCM int16 mono
      16 kHz, 2.0 to 7.5 s long (64 KB to 240 KB). Odd-numbered files carry a LIST/INFO
      chunk (36 to 98 bytes) between "fmt " and "data", as files written by sox / DAWs do,
      so their samples start at byte 44 + 8 + len(LIST) instead of 44.
  DATA/val/val_{K}.wav            10 files, 3.0 to 5.0 s, plain 44-byte header.

Training: per epoch every train file contributes 2 windows (128 windows), shuffled by a
numpy rng (seed 5150 + epoch); each window = 16000 frames from a random start frame.
Batches of 8 windows; each batch is handed to Pool(2).map_async(load_window, items,
chunksize=4), so each worker process reads 4 windows of a batch; the batch for step k+1 is
submitted before step k's 25 ms of compute. load_window: wave.open(path) ->
setpos(start) -> readframes(16000) -> close. 5 epochs x 16 steps = 80 steps. Every 20
steps (after steps 20, 40, 60, 80) the main process validates: for each of the 10 val
files, wave.open and readframes(4000) until the end (~16-20 reads per file), 4 ms sleep
per file. No checkpoint.

What a syscall trace sees: two forked worker processes (created once, kept to the end) do
all training reads. Per window, in one worker: openat(train/....wav, O_RDONLY|O_CLOEXEC),
lseek(fd, 0, SEEK_CUR), read(fd, 4096) = 4096 at offset 0 (the BufferedReader fill,
covering the RIFF/fmt/LIST/data headers), lseek(SEEK_CUR) = 4096, then setpos + the first
readframes make a lseek(fd, data_start + 2*start_frame, SEEK_SET) (skipped when the window
starts inside the first 4 KB) and the 32000-byte window arrives as read(28672) straight
into the result plus read(4096) refilling the buffer (32768 bytes read, 768 of them
unused), close. 640 opens, ~1900 reads, ~23.6 MB over the run (128 windows per epoch, each
file opened about 10 times in all). Worker pids alternate by 4-window halves of each
batch. The main process reads the val files: 4 passes x 10 files, each opened once per
pass and read sequentially from 0 to EOF, all in 4096-byte reads (the BufferedReader
splits every 8000-byte readframes into a direct 4096 read + a 4096 buffer fill), the
last one short: ~31 reads of 4 KB per file (~96-160 KB), 1.26 MB per pass, 5.0 MB in all.
The val pass happens while the next training batch is being loaded by the pool. No
writes.

Usage: wav_windows_pool_periodic_val.py DATA [--make | --truth]
numpy only (standard-library wave + multiprocessing).
"""
import json
import multiprocessing as mp
import os
import struct
import sys
import time
import wave

import numpy as np

SR, WIN = 16000, 16000
N_SPK, N_UTT, N_VAL = 16, 4, 10
WIN_PER_FILE, BATCH, EPOCHS, WORKERS, CHUNKSIZE = 2, 8, 5, 2, 4
VAL_EVERY, VAL_CHUNK = 20, 4000
COMPUTE_S, VAL_COMPUTE_S = 0.025, 0.004
N_TRAIN = N_SPK * N_UTT
STEPS = N_TRAIN * WIN_PER_FILE // BATCH
SEED = 5150


def train_spec():
    rng = np.random.default_rng(SEED)
    frames = (rng.uniform(2.0, 7.5, N_TRAIN) * SR).astype(int)
    list_len = 2 * rng.integers(18, 50, N_TRAIN)
    list_len[::2] = 0
    return frames, list_len


def val_frames():
    return (np.random.default_rng(SEED + 1).uniform(3.0, 5.0, N_VAL) * SR).astype(int)


def train_name(i):
    return "spk%02d_utt%d.wav" % (i // N_UTT, i % N_UTT)


def write_wav(path, samples, list_len):
    data = samples.astype("<i2").tobytes()
    fmt = struct.pack("<HHIIHH", 1, 1, SR, SR * 2, 2, 16)
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt
    if list_len:
        info = b"INFO" + b"ISFT" + struct.pack("<I", list_len - 12) + \
            b"synthwav".ljust(list_len - 12, b"\0")
        chunks += b"LIST" + struct.pack("<I", len(info)) + info
    chunks += b"data" + struct.pack("<I", len(data)) + data
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks)


def make(data):
    frames, list_len = train_spec()
    rng = np.random.default_rng(SEED + 2)
    os.makedirs(os.path.join(data, "train"), exist_ok=True)
    os.makedirs(os.path.join(data, "val"), exist_ok=True)

    def tone(n):
        t = np.arange(n) / SR
        f0 = rng.uniform(90, 300)
        x = 6000 * np.sin(2 * np.pi * f0 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 0.7 * t))
        return x + rng.normal(0, 800, n)

    for i in range(N_TRAIN):
        write_wav(os.path.join(data, "train", train_name(i)), tone(int(frames[i])),
                  int(list_len[i]))
    for k, n in enumerate(val_frames()):
        write_wav(os.path.join(data, "val", "val_%02d.wav" % k), tone(int(n)), 0)


def epoch_windows(epoch):
    frames, _ = train_spec()
    rng = np.random.default_rng(SEED + 10 + epoch)
    items = [(i, int(rng.integers(0, frames[i] - WIN + 1)))
             for i in range(N_TRAIN) for _ in range(WIN_PER_FILE)]
    return [items[j] for j in rng.permutation(len(items))]


def truth(data):
    frames, list_len = train_spec()
    vf = val_frames()
    sizes = 44 + frames * 2 + np.where(list_len > 0, list_len + 8, 0)
    return {
        "program": "wav_windows_pool_periodic_val", "needs": [],
        "format": "WAV (PCM int16 mono 16 kHz), some with a LIST chunk",
        "io_library": "standard-library wave (buffered open, setpos, readframes)",
        "data_layout": "DATA/train/spkSS_uttU.wav (64), DATA/val/val_KK.wav (10)",
        "num_files": N_TRAIN, "samples_per_file": "random windows: 2 per file per epoch",
        "val_files": N_VAL,
        "sample_size": {"dist": "fixed", "bytes": WIN * 2, "frames": WIN},
        "file_size": {"dist": "uniform 2.0-7.5 s", "min_bytes": int(sizes.min()),
                      "max_bytes": int(sizes.max()), "total_bytes": int(sizes.sum())},
        "batch_size": BATCH,
        "readers": {"kind": "multiprocessing.Pool (fork) worker processes, map_async "
                            "chunksize 4", "count": WORKERS},
        "prefetch": {"batches_ahead": 1},
        "epochs": EPOCHS, "steps_per_epoch": STEPS, "total_steps": EPOCHS * STEPS,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "per epoch permutation of (file, random start) windows",
        "eval": {"every_steps": VAL_EVERY, "passes": EPOCHS * STEPS // VAL_EVERY,
                 "files": N_VAL, "reader": "main process, whole files in 4000-frame "
                 "readframes calls", "bytes_per_pass": int(44 * N_VAL + 2 * vf.sum()),
                 "compute_s_per_file": VAL_COMPUTE_S},
        "checkpoint": None,
        "read_pattern": "train: open, 4 KB header read, seek, one 32000-byte read per "
                        "window, close (pool workers); val: sequential whole-file reads "
                        "(main process)",
        "window_reads_total": EPOCHS * N_TRAIN * WIN_PER_FILE,
    }


def load_window(args):
    path, start = args
    with wave.open(path, "rb") as w:
        assert w.getframerate() == SR and w.getsampwidth() == 2
        w.setpos(start)
        raw = w.readframes(WIN)
    x = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    return float(np.log(np.mean(x * x) + 1e-8)), x[::40].copy()


def validate(data):
    score = 0.0
    for k in range(N_VAL):
        with wave.open(os.path.join(data, "val", "val_%02d.wav" % k), "rb") as w:
            n = 0
            while True:
                raw = w.readframes(VAL_CHUNK)
                if not raw:
                    break
                n += len(raw) // 2
                score += float(np.abs(np.frombuffer(raw, dtype="<i2")).mean())
        time.sleep(VAL_COMPUTE_S)
    return score / N_VAL


def train(data):
    tdir = os.path.join(data, "train")
    batches = []
    for epoch in range(EPOCHS):
        ws = epoch_windows(epoch)
        batches += [[(os.path.join(tdir, train_name(i)), s) for i, s in ws[k:k + BATCH]]
                    for k in range(0, len(ws), BATCH)]
    steps, energy, vals = 0, 0.0, []
    with mp.get_context("fork").Pool(WORKERS) as pool:
        pending = pool.map_async(load_window, batches[0], chunksize=CHUNKSIZE)
        for k in range(len(batches)):
            out = pending.get()
            if k + 1 < len(batches):
                pending = pool.map_async(load_window, batches[k + 1], chunksize=CHUNKSIZE)
            energy += sum(e for e, _ in out)
            time.sleep(COMPUTE_S)
            steps += 1
            if steps % VAL_EVERY == 0:
                vals.append(round(validate(data), 1))
    print("wav_windows_pool_periodic_val: %d steps, mean log-energy %.3f, val %s"
          % (steps, energy / (steps * BATCH), vals))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
