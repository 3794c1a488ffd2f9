"""Random 1-second crops of .wav files, read with the wave module (open, setpos, readframes).

DATA holds 24 .wav files (16-bit PCM, mono, 16 kHz, written with the wave module: a 44-byte
RIFF header then the samples), each 3 to 10 s long (duration uniform, seeded, a whole number
of frames; 98426 to 286484 bytes, 4.7 MB in all). Each epoch visits every file 4 times in
a fresh shuffle (one random.Random for the run, which also draws the crops): a sample opens
the file with wave.open(path, "rb"), seeks to a random frame (setpos, uniform over the
frames where a full second still fits) and reads 1 s (readframes(16000): 32000 bytes), then
closes it. Main thread only, batch 8, then 10 ms of sleep as compute; 2 epochs of 12 steps.

What a syscall trace sees, all on the main thread, one file at a time: per sample an openat
(O_RDONLY|O_CLOEXEC), fstat, ioctl(TCGETS) (fails), lseek(0, SEEK_CUR), then a buffered read
of the first B bytes from offset 0 (B is the file object's buffer size, the file system's
st_blksize: 4096 on the test machine's /tmp, 8192 where st_blksize is not reported) which
covers the 44-byte header; lseek(0, SEEK_CUR), then setpos is an lseek(SEEK_SET) to 44 +
2 x frame (any even offset, not aligned); readframes(16000) asks for 32000 bytes, which the
buffered reader splits into one read of the largest multiple of B below it (28672 with B =
4096) straight into the result and one read of B to refill its buffer (short when it hits
the end of the file); close. So 3 reads per sample, 36864 bytes read for 32000 of samples
(with B = 4096); when the crop starts inside the first block there is no lseek to it and
the reads are 4096, 24576, 4096. 192 samples (every file opened 8 times over the run), 576
reads; 8 samples in a burst at each step's start, then 10 ms with no I/O. No writes.

Usage: wav_random_crop.py DATA [--make | --truth]
Fixed by the program: 24 wav files (3-10 s, 16 kHz mono 16-bit), 4 crops of 1 s per file per
epoch, batch 8, main thread only, 2 epochs of 12 steps, 10 ms compute per step, files
shuffled per epoch, random crop offsets, no checkpoint, no eval. stdlib only (numpy for
--make).
"""
import json
import os
import random
import sys
import time
import wave

import numpy as np

FILES, RATE, CROP_S, CROPS_PER_FILE, BATCH, EPOCHS, COMPUTE_S = 24, 16000, 1, 4, 8, 2, 0.010
MIN_S, MAX_S = 3.0, 10.0
SEED = 16000


def frame_counts():
    rng = np.random.default_rng(SEED)
    return [int(rng.uniform(MIN_S, MAX_S) * RATE) for _ in range(FILES)]


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".wav")) \
        if os.path.isdir(data) else []


def truth(data):
    frames = frame_counts()
    fsz = [os.path.getsize(f) for f in file_names(data)]
    steps = FILES * CROPS_PER_FILE // BATCH
    return {
        "program": "wav_random_crop", "needs": [], "format": "wav (RIFF, PCM 16-bit mono)",
        "io_library": "wave module (buffered file object)", "data_layout": "DATA/*.wav",
        "num_files": FILES, "samples_per_file": CROPS_PER_FILE,
        "sample_size": {"dist": "fixed", "bytes": CROP_S * RATE * 2, "frames": CROP_S * RATE,
                        "note": "a random 1 s crop at a random frame"},
        "file_size": {"header_bytes": 44, "duration_s": [MIN_S, MAX_S],
                      "frames": {"min": min(frames), "max": max(frames),
                                 "mean": sum(frames) / len(frames)},
                      "bytes": fsz, "total": sum(fsz)},
        "batch_size": BATCH, "readers": {"kind": "none", "count": 0}, "prefetch": 0,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "files (each 4 times), per epoch; random crop offsets",
        "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "per sample: open, read the header, seek to a random frame, read "
                        "32000 bytes, close; main thread",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    for i, n in enumerate(frame_counts()):
        t = np.arange(n) / RATE
        x = 8000 * np.sin(2 * np.pi * rng.uniform(100, 1000) * t) + rng.normal(0, 1500, n)
        with wave.open(os.path.join(data, f"clip_{i:03d}.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(RATE)
            w.writeframes(np.clip(x, -32768, 32767).astype("<i2").tobytes())


def crop(path, rng):
    with wave.open(path, "rb") as w:
        n = w.getnframes()
        w.setpos(rng.randrange(0, n - CROP_S * RATE + 1))
        raw = w.readframes(CROP_S * RATE)
    return np.frombuffer(raw, dtype="<i2")


def train(data):
    names = file_names(data)
    rng = random.Random(SEED)
    for epoch in range(EPOCHS):
        order = names * CROPS_PER_FILE
        rng.shuffle(order)
        for s in range(len(order) // BATCH):
            batch = np.stack([crop(p, rng) for p in order[s * BATCH:(s + 1) * BATCH]])
            assert batch.shape == (BATCH, CROP_S * RATE)
            time.sleep(COMPUTE_S)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
