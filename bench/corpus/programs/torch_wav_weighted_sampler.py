"""Keyword-spotting / audio-event classification from a folder of variable-length WAV clips
(one RIFF/WAVE file per clip, 16 kHz mono PCM16), read by a torch DataLoader with THREE
non-persistent worker processes, a class-balancing WeightedRandomSampler (draws WITH
replacement, so some clips are read several times per epoch and others not at all) and a
custom collate_fn that pads the clips of a batch to the longest one. Each clip is parsed the
way soundfile/libsndfile-style readers do it: the 12-byte RIFF header, then the chunk
headers one by one (8 bytes each), the "fmt " body, an optional "LIST" chunk that is
SKIPPED with a relative seek, then the whole "data" chunk in one read.

Data set (DATA/, about 27.9 MB):
  DATA/manifest.csv            header + 480 lines "clips/clip_0000.wav,n_frames,label"
                               (13,839 bytes), read once by the main process.
  DATA/clips/clip_IIII.wav     480 WAV files. Clip length is BIMODAL: 70% short clips
                               (uniform 0.4-1.2 s = 6,400-19,200 frames) and 30% long
                               clips (uniform 3-6 s = 48,000-96,000 frames); 2 bytes per
                               frame. Layout: "RIFF" size "WAVE" (12 bytes), "fmt " chunk
                               (8 + 16 bytes), for every 3rd clip (i % 3 == 0) a "LIST"
                               chunk (8 + 22..62 bytes, INFO tags), then "data" (8 bytes +
                               2 * n_frames). Files are 12,888-191,876 bytes
                               (mean 58,114; 27,894,956 in all).
  Labels: 8 classes with a skewed prior (p = .40 .20 .12 .10 .07 .05 .04 .02; drawn
  counts 169/102/73/44/34/26/23/9 clips); the sampler
  weight of a clip is 1 / (count of its class), so every class is drawn about equally often.

Training: the main process reads manifest.csv (csv module). DataLoader(batch_size=16,
sampler=WeightedRandomSampler(weights, num_samples=400, replacement=True, generator
seeded 3141), num_workers=3, pin_memory=False, drop_last=True, persistent_workers=False,
prefetch_factor 2 (default), fork). 400 draws per epoch -> 25 steps per epoch (drop_last
drops nothing: 400 = 25 x 16). __getitem__(i): open(path, "rb", buffering=0) (a NEW open
per sample, closed after the read), parse as described, np.frombuffer(int16) -> float32
tensor. collate: zero-pad to the longest clip of the batch -> (16, Lmax) float32 + lengths
+ labels. Compute: 25 ms sleep per step. 3 epochs, 75 steps. No checkpoint, no writes.

What a syscall trace sees (strace -ff -e trace=openat,read,pread64,lseek,close,write,fstat):
importing torch opens many .so/.py files (not data). The main process opens manifest.csv
once (Python text mode: openat, fstat, ioctl(TCGETS), lseek(0, SEEK_CUR), read(8192) = 8192,
read(8192) = 5647, read(8192) = 0, close: 13,839 bytes). Because the workers are NOT
persistent, 3 new worker processes are forked at the start of EVERY epoch (9 worker
processes over the run) and exit at its end; the main process reads no clip data.
Batches go round-robin to the workers (worker w loads batches w, w+3, ..., i.e. 9/8/8
batches = 144/128/128 samples per epoch), 2 batches in flight per worker (6 at epoch
start). Per sample, in the worker: openat(clips/clip_IIII.wav, O_RDONLY|O_CLOEXEC), fstat,
read(12) [RIFF], read(8) ["fmt " header], read(16) [fmt body], read(8) [next chunk header];
for clips with a LIST chunk (i % 3 == 0) that header is LIST, so lseek(fd, 22..62,
SEEK_CUR) and another read(8) [data header]; then ONE read(2 * n_frames) of the whole PCM
data (12,844-191,832 bytes, bimodal: most 12.8-38.4 KB, ~30% 96-192 KB), close. So 5
reads per sample (6 reads + 1 lseek for LIST clips), the whole file (minus a skipped
LIST body) read once, strictly sequentially; every request but the last is tiny (8-16
bytes): 1200 read(12), 1200 read(16), 2755 read(8) over the run. Files are reopened on every draw, and the
sampler draws WITH replacement: per epoch 400 opens of only 225/218/222 distinct clips
(376 distinct over the run), the 9 clips of the rarest class re-read up to 8-11 times
each. Per epoch 2,107/2,131/2,117 reads, 107/131/117 lseeks, 21,579,494 / 23,990,358 /
23,096,000 bytes read (the skipped LIST bodies are never read; total over the run:
1200 opens, 6355 reads, 355 lseeks, 68,665,852 bytes from a 27.9 MB data set).
No pread, no mmap of data, no writes.

Usage: torch_wav_weighted_sampler.py DATA [--make | --truth]
needs torch (run with /opt/dlio-reference/venv/bin/python).
"""
import csv
import json
import os
import struct
import sys
import time

import numpy as np

N_CLIPS, N_CLASSES, SR = 480, 8, 16000
CLASS_P = [0.40, 0.20, 0.12, 0.10, 0.07, 0.05, 0.04, 0.02]
SHORT_FRAC, SHORT_S, LONG_S = 0.7, (0.4, 1.2), (3.0, 6.0)
BATCH, DRAWS, EPOCHS, WORKERS = 16, 400, 3, 3
COMPUTE_S = 0.025
SEED = 3141


def meta():
    rng = np.random.default_rng(SEED)
    short = rng.random(N_CLIPS) < SHORT_FRAC
    secs = np.where(short, rng.uniform(*SHORT_S, N_CLIPS), rng.uniform(*LONG_S, N_CLIPS))
    frames = (secs * SR).astype(np.int64)
    labels = rng.choice(N_CLASSES, size=N_CLIPS, p=CLASS_P)
    list_len = np.where(np.arange(N_CLIPS) % 3 == 0,
                        2 * rng.integers(11, 32, N_CLIPS), 0)  # even, 22..62
    return frames, labels, list_len


def file_sizes():
    frames, _, list_len = meta()
    return 12 + 24 + np.where(list_len > 0, 8 + list_len, 0) + 8 + 2 * frames


def truth(data):
    frames, labels, list_len = meta()
    sizes = file_sizes()
    steps = DRAWS // BATCH
    return {
        "program": "torch_wav_weighted_sampler", "needs": ["torch"],
        "format": "RIFF/WAVE PCM16 mono 16 kHz, one file per clip (+ manifest.csv)",
        "io_library": "raw WAV chunk parsing with unbuffered Python file objects "
                      "(open(buffering=0): read(12), read(8), read(16), read(8), "
                      "[lseek past LIST, read(8)], read(data)) in torch DataLoader workers",
        "data_layout": "DATA/manifest.csv, DATA/clips/clip_IIII.wav",
        "num_files": N_CLIPS, "samples_per_file": 1,
        "sample_size": {"distribution": "bimodal: 70% short clips 0.4-1.2 s, 30% long clips "
                                        "3-6 s (16 kHz int16)",
                        "mean_bytes": int(sizes.mean()), "min_bytes": int(sizes.min()),
                        "max_bytes": int(sizes.max()), "total_bytes": int(sizes.sum()),
                        "data_read_min_bytes": int(2 * frames.min()),
                        "data_read_max_bytes": int(2 * frames.max())},
        "batch_size": BATCH,
        "readers": {"kind": "torch DataLoader worker processes (fork, NOT persistent: "
                            "re-forked every epoch)",
                    "count": WORKERS, "processes_over_run": WORKERS * EPOCHS},
        "prefetch": {"prefetch_factor": 2, "batches_in_flight": 2 * WORKERS},
        "sampler": {"kind": "WeightedRandomSampler", "replacement": True,
                    "num_samples_per_epoch": DRAWS, "weights": "1 / class count",
                    "seed": SEED},
        "drop_last": True, "pin_memory": False,
        "collate": "custom: zero-pad to longest clip in batch",
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "checkpoint": None,
        "side_files": [{"path": "manifest.csv", "reads": "once, main process"}],
        "read_pattern": "per sample: openat, 5 read syscalls (12, 8, 16, 8, data; +lseek "
                        "SEEK_CUR and an extra read(8) when a LIST chunk is present), close; "
                        "whole file read sequentially; files reopened on every draw",
        "opens_per_sample": 1,
        "reads_per_sample": 5,
        "lseeks_per_sample": "1 for clips with a LIST chunk (i % 3 == 0), else 0",
        "samples_per_epoch": DRAWS,
        "approx_bytes_per_epoch": int(DRAWS * sizes.mean()),
        # exact values for torch 2.x's WeightedRandomSampler (multinomial, seed 3141)
        "bytes_read_per_epoch": [21579494, 23990358, 23096000],
        "distinct_clips_per_epoch": [225, 218, 222],
        "reads_total": 6355, "lseeks_total": 355, "opens_total": EPOCHS * DRAWS,
    }


def make(data):
    frames, labels, list_len = meta()
    os.makedirs(os.path.join(data, "clips"), exist_ok=True)
    rng = np.random.default_rng(SEED + 7)
    rows = []
    for i in range(N_CLIPS):
        n = int(frames[i])
        t = np.arange(n, dtype=np.float32) / SR
        f0 = 200.0 + 150.0 * labels[i]
        x = 0.3 * np.sin(2 * np.pi * f0 * t) + 0.05 * rng.standard_normal(n).astype(np.float32)
        pcm = (np.clip(x, -1, 1) * 32000).astype("<i2").tobytes()
        chunks = [b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, SR, SR * 2, 2, 16)]
        if list_len[i]:
            info = (b"INFO" + b"ISFT" + struct.pack("<I", int(list_len[i]) - 12)
                    + b"rec%d" % (i % 5)).ljust(int(list_len[i]), b"\0")
            chunks.append(b"LIST" + struct.pack("<I", int(list_len[i])) + info)
        chunks.append(b"data" + struct.pack("<I", len(pcm)) + pcm)
        body = b"WAVE" + b"".join(chunks)
        rel = "clips/clip_%04d.wav" % i
        with open(os.path.join(data, rel), "wb") as f:
            f.write(b"RIFF" + struct.pack("<I", len(body)) + body)
        rows.append((rel, n, int(labels[i])))
    with open(os.path.join(data, "manifest.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["path", "n_frames", "label"])
        w.writerows(rows)


def read_wav(path):
    """Minimal RIFF/WAVE reader: chunk headers one by one, skip unknown chunks."""
    with open(path, "rb", buffering=0) as f:
        riff = f.read(12)
        assert riff[:4] == b"RIFF" and riff[8:12] == b"WAVE", path
        fmt = None
        while True:
            hdr = f.read(8)
            if len(hdr) < 8:
                raise ValueError("no data chunk in %s" % path)
            cid, csz = hdr[:4], struct.unpack("<I", hdr[4:])[0]
            if cid == b"fmt ":
                fmt = struct.unpack("<HHIIHH", f.read(csz)[:16])
            elif cid == b"data":
                pcm = f.read(csz)
                break
            else:
                f.seek(csz + (csz & 1), os.SEEK_CUR)
        assert fmt is not None and fmt[0] == 1 and fmt[5] == 16
        return np.frombuffer(pcm, dtype="<i2"), fmt[2]


class WavClips:
    def __init__(self, root, rows):
        self.root, self.rows = root, rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        import torch
        rel, n, label = self.rows[i]
        pcm, sr = read_wav(os.path.join(self.root, rel))
        assert sr == SR and len(pcm) == n
        return torch.from_numpy(pcm.astype(np.float32) / 32768.0), label


def pad_collate(items):
    import torch
    lens = torch.tensor([len(x) for x, _ in items])
    out = torch.zeros(len(items), int(lens.max()))
    for j, (x, _) in enumerate(items):
        out[j, :len(x)] = x
    return out, lens, torch.tensor([y for _, y in items])


def train(data):
    import warnings
    import torch
    from torch.utils.data import DataLoader, WeightedRandomSampler
    # 3 workers on a 2-core box is deliberate here (I/O-bound workers)
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    with open(os.path.join(data, "manifest.csv"), newline="") as f:
        r = csv.reader(f)
        next(r)
        rows = [(p, int(n), int(y)) for p, n, y in r]
    labels = np.array([y for _, _, y in rows])
    counts = np.bincount(labels, minlength=N_CLASSES)
    weights = torch.tensor(1.0 / counts[labels], dtype=torch.double)
    sampler = WeightedRandomSampler(weights, num_samples=DRAWS, replacement=True,
                                    generator=torch.Generator().manual_seed(SEED))
    loader = DataLoader(WavClips(data, rows), batch_size=BATCH, sampler=sampler,
                        num_workers=WORKERS, pin_memory=False, drop_last=True,
                        collate_fn=pad_collate, multiprocessing_context="fork")
    steps, seen, per_class = 0, 0, np.zeros(N_CLASSES, np.int64)
    for epoch in range(EPOCHS):
        for x, lens, y in loader:
            assert x.shape[0] == BATCH and x.shape[1] == int(lens.max())
            per_class += np.bincount(y.numpy(), minlength=N_CLASSES)
            seen += BATCH
            time.sleep(COMPUTE_S)
            steps += 1
    print("torch_wav_weighted_sampler: %d steps, %d samples, per-class draws %s"
          % (steps, seen, per_class.tolist()))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
