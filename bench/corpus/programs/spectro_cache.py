"""spectro_cache.py -- keyword-spotting audio trainer with an on-disk log-mel feature cache.

Speech / audio-tagging recipes often compute features on the fly during the
first epoch and cache them on disk next to the data (one .npy per utterance),
so later epochs skip decoding and the STFT.  This program does exactly that:
epoch 0 reads raw 16 kHz PCM clips with a whole-file f.read(), computes an
80-bin log-mel spectrogram with numpy and np.save()s it into DATA/cache/;
epochs 1 and 2 np.load() the cached features instead of touching the audio.
Single process, main thread only, no prefetch.

Data set layout (DATA/)
-----------------------
  manifest.csv             "clip_NNNN.pcm,<num_samples>,<label>" per line,
                           720 lines, 15,963 bytes.
  pcm/clip_0000.pcm .. pcm/clip_0719.pcm   raw little-endian int16 mono
      16 kHz, no header.  Length ~ Uniform{16000 .. 63999} samples (1-4 s,
      seed 14006; bumped by 160 samples when the resulting frame count would
      make the cache file 4 KiB aligned), so 32,424 .. 127,978 bytes per clip,
      mean 80,419, 57,902,026 bytes in total.
  cache/clip_NNNN.npy      created by the run (the directory is deleted at
      start-up): float16 [frames, 80], frames = 1 + (samples - 400) // 160
      (25 ms window, 10 ms hop), i.e. 98 .. 398 frames; .npy v1.0 header of
      128 bytes + 160*frames bytes = 15,968 .. 63,808 bytes, 28,812,800 bytes
      for all 720 (mean 40,018).

Training loop
-------------
  3 epochs over 720 clips, order = default_rng(14006 + epoch).permutation(720),
  batch 16 clips -> 45 steps per epoch, 135 steps in total, each followed by
  time.sleep(0.020) of simulated compute.  A batch is the 16 spectrograms
  cropped / zero-padded to 200 frames (float32 [16, 200, 80]).
  Epoch 0: for each clip, open(pcm, 'rb').read() -> STFT (Hann 400, rfft 512)
  -> mel filterbank (80) -> log -> float16 -> np.save(cache/clip.npy).
  Epochs 1, 2: np.load(cache/clip.npy) for each clip, in a new order.

What a syscall trace sees (strace, DATA files only)
---------------------------------------------------
  Start-up: shutil.rmtree(cache/) if a previous run left it (directory
      openat + fcntl dup + one lseek on the dir fd, unlinkat per file), mkdir;
      manifest.csv openat, lseek(0,SEEK_CUR) x2, read(15964) = 15963,
      read(1) = 0, close (Python text-mode whole-file read).
  Epoch 0, per clip (16 per step), PCM read:
      openat(pcm, O_RDONLY|O_CLOEXEC) ; lseek(0,SEEK_CUR) x2 ;
      read(fd, size+1) = size ; read(fd, 1) = 0 ; close
    then the cache write (np.save -> ndarray.tofile through a dup'ed fd):
      openat(cache/clip.npy, O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC) = A ;
      lseek(A,0,SEEK_CUR) ; write(A, 128) header ;
      fcntl(A, F_DUPFD_CLOEXEC) = B ; fcntl(B, F_GETFL) ;
      lseek(B,0,SEEK_CUR) ; lseek(A,0,SEEK_CUR) ; lseek(B,128,SEEK_SET) ;
      write(B, D & ~4095) (one direct write) ; write(B, D % 4096) (stdio
      buffer flushed at fclose; absent for the 6 clips whose D is a multiple
      of 4096) ; close(B) ; lseek(A,128,SEEK_SET) ;
      lseek(A, 128 + D, SEEK_SET) ; close(A)        (D = 160*frames)
    -> 6 lseek, 2 fcntl, 2-3 write per cache file.
  Epochs 1 and 2, per clip, np.load (header through Python's buffered
  reader, payload through numpy.fromfile on a dup'ed fd):
      openat(cache/clip.npy) = A ; lseek(A,0,SEEK_CUR) ; read(A, 4096) = 4096 ;
      fcntl(A, F_DUPFD_CLOEXEC) = B ; fcntl(B, F_GETFL) ;
      lseek(B,0,SEEK_CUR) ; lseek(A,0,SEEK_CUR) ;
      lseek(B,0,SEEK_SET) ; read(B, 128) ; lseek(B,0,SEEK_SET) ;
      read(B, 4096) ; read(B, (S-4096) & ~4095) ; read(B, 4096) = S % 4096 ;
      close(B) ; lseek(A,4096,SEEK_SET) ; lseek(A,S,SEEK_SET) ; close(A)
    -> 5 reads, 7 lseek, 2 fcntl; 4096 + 128 + S bytes for a cache file of S
      bytes (the first 128 bytes are read three times and the first block
      twice: once by Python's buffer, then by stdio).
  Totals: epoch 0 reads every PCM byte once (1,440 reads, 57,902,026 bytes)
  and writes 720 cache files (2,154 writes, 28,812,800 bytes); epochs 1 and 2
  each do 3,600 reads of 31,854,080 bytes.  Whole run: 8,642 reads,
  121,626,149 bytes read, 15,842 lseek on regular files (+1 on the cache
  directory when a previous run is cleaned up), 2,881 openat of files.
  No mmap, no pread.
"""
import csv
import json
import os
import shutil
import sys
import time

import numpy as np

NAME = "spectro_cache"
SEED = 14006
N_CLIPS = 720
SR = 16000
MIN_S, MAX_S = 16000, 64000
WIN, HOP, NFFT, NMEL = 400, 160, 512, 80
CROP = 200
BATCH = 16
EPOCHS = 3
STEP_SLEEP = 0.020
NPY_HDR = 128
PAGE = 4096


def frames_of(n):
    return 1 + (n - WIN) // HOP


def layout():
    rng = np.random.default_rng(SEED)
    n = rng.integers(MIN_S, MAX_S, size=N_CLIPS)
    for i in range(N_CLIPS):
        while (NPY_HDR + 2 * NMEL * frames_of(int(n[i]))) % PAGE == 0:
            n[i] += HOP
    labels = rng.integers(0, 12, size=N_CLIPS)
    return n.astype(np.int64), labels


def manifest_text(n, labels):
    return "".join(f"clip_{i:04d}.pcm,{int(n[i])},{int(labels[i])}\n" for i in range(N_CLIPS))


def make(data):
    n, labels = layout()
    os.makedirs(os.path.join(data, "pcm"), exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    t = np.arange(MAX_S + 10 * HOP) / SR
    for i in range(N_CLIPS):
        f0 = 200 + 150 * int(labels[i])
        sig = 0.3 * np.sin(2 * np.pi * f0 * t[:n[i]]) + 0.05 * rng.standard_normal(int(n[i]))
        (sig * 12000).astype("<i2").tofile(os.path.join(data, "pcm", f"clip_{i:04d}.pcm"))
    with open(os.path.join(data, "manifest.csv"), "w") as f:
        f.write(manifest_text(n, labels))
    print(f"wrote {N_CLIPS} clips to {data}")


def mel_filterbank():
    def hz2mel(h):
        return 2595 * np.log10(1 + h / 700)

    def mel2hz(m):
        return 700 * (10 ** (m / 2595) - 1)

    pts = mel2hz(np.linspace(hz2mel(20), hz2mel(SR / 2), NMEL + 2))
    bins = np.floor((NFFT + 1) * pts / SR).astype(int)
    fb = np.zeros((NMEL, NFFT // 2 + 1), np.float32)
    for m in range(1, NMEL + 1):
        lo, c, hi = bins[m - 1], bins[m], bins[m + 1]
        for k in range(lo, c):
            fb[m - 1, k] = (k - lo) / max(c - lo, 1)
        for k in range(c, hi):
            fb[m - 1, k] = (hi - k) / max(hi - c, 1)
    return fb


def logmel(pcm, fb, window):
    x = pcm.astype(np.float32) / 32768.0
    nf = frames_of(len(x))
    idx = np.arange(WIN)[None, :] + HOP * np.arange(nf)[:, None]
    spec = np.abs(np.fft.rfft(x[idx] * window, n=NFFT)) ** 2
    return np.log(spec @ fb.T + 1e-6).astype(np.float16)


def run(data):
    cache = os.path.join(data, "cache")
    if os.path.exists(cache):
        shutil.rmtree(cache)
    os.makedirs(cache)
    with open(os.path.join(data, "manifest.csv")) as f:
        rows = list(csv.reader(f.read().splitlines()))
    names = [r[0] for r in rows]
    labels = np.array([int(r[2]) for r in rows])
    fb = mel_filterbank()
    window = np.hanning(WIN).astype(np.float32)
    w = np.random.default_rng(0).standard_normal((NMEL, 12)).astype(np.float32)
    t0 = time.time()
    steps = 0
    for epoch in range(EPOCHS):
        order = np.random.default_rng(SEED + epoch).permutation(N_CLIPS)
        for b in range(0, N_CLIPS, BATCH):
            batch = np.zeros((BATCH, CROP, NMEL), np.float32)
            for r, i in enumerate(order[b:b + BATCH]):
                cpath = os.path.join(cache, names[i][:-4] + ".npy")
                if epoch == 0:
                    with open(os.path.join(data, "pcm", names[i]), "rb") as f:
                        pcm = np.frombuffer(f.read(), dtype="<i2")
                    feat = logmel(pcm, fb, window)
                    np.save(cpath, feat)
                else:
                    feat = np.load(cpath)
                k = min(CROP, len(feat))
                batch[r, :k] = feat[:k]
            logits = batch.mean(axis=1) @ w
            _ = (logits.argmax(1) == labels[order[b:b + BATCH]]).mean()
            time.sleep(STEP_SLEEP)
            steps += 1
        print(f"epoch {epoch} ({'compute+cache' if epoch == 0 else 'cached'}): steps={steps} "
              f"t={time.time() - t0:.2f}s", flush=True)
    print(f"finished {steps} steps in {time.time() - t0:.2f}s")


def truth():
    n, labels = layout()
    pcm = 2 * n
    D = 2 * NMEL * np.array([frames_of(int(v)) for v in n], dtype=np.int64)
    S = NPY_HDR + D
    man = len(manifest_text(n, labels))
    write_calls = 1 + (D >= PAGE).astype(int) + (D % PAGE != 0).astype(int)
    load_bytes = int((PAGE + NPY_HDR + S).sum())
    load_reads = 3 + ((S - PAGE) // PAGE > 0).astype(int) + (S % PAGE != 0).astype(int)
    spe = -(-N_CLIPS // BATCH)
    return {
        "program": NAME,
        "format": "raw int16 PCM clips + per-clip .npy float16 log-mel cache written in epoch 0",
        "files": {"manifest.csv": man,
                  "pcm/clip_NNNN.pcm": {"count": N_CLIPS, "bytes": int(pcm.sum())},
                  "cache/clip_NNNN.npy (written by the run)": {"count": N_CLIPS,
                                                               "bytes": int(S.sum())}},
        "num_files": N_CLIPS + 1,
        "samples_per_file": 1,
        "num_samples": N_CLIPS,
        "sample_size_bytes": {"what": "PCM clip (epoch 0)", "mean": float(pcm.mean()),
                              "min": int(pcm.min()), "max": int(pcm.max()),
                              "total_bytes": int(pcm.sum())},
        "cache_file_size_bytes": {"mean": float(S.mean()), "min": int(S.min()),
                                  "max": int(S.max()), "total_bytes": int(S.sum())},
        "dataset_bytes": man + int(pcm.sum()),
        "batch_size": BATCH,
        "readers": {"kind": "main thread", "count": 1},
        "prefetch": None,
        "sampler": "per-epoch seeded permutation (default_rng(14006+epoch))",
        "epochs": EPOCHS,
        "steps_per_epoch": spe,
        "total_steps": spe * EPOCHS,
        "compute_time_per_step_s": STEP_SLEEP,
        "checkpoints": None,
        "feature_cache": {"written_in_epoch": 0, "read_in_epochs": list(range(1, EPOCHS)),
                          "dir": "cache/", "deleted_at_start": True},
        "io_api": "f.read() whole file; np.save; np.load (fromfile on dup'ed fd)",
        "expected_bytes_read_per_epoch": {"epoch0": int(pcm.sum()),
                                          "epoch1+": load_bytes},
        "expected_bytes_read_total": man + int(pcm.sum()) + (EPOCHS - 1) * load_bytes,
        "expected_read_calls": {"epoch0": {"read": 2 * N_CLIPS, "openat": N_CLIPS},
                                "epoch1+": {"read": int(load_reads.sum()), "openat": N_CLIPS,
                                            "lseek": 7 * N_CLIPS},
                                "total_read": 2 + 2 * N_CLIPS + (EPOCHS - 1) * int(load_reads.sum()),
                                "total_lseek": 2 + 2 * N_CLIPS + 6 * N_CLIPS
                                + (EPOCHS - 1) * 7 * N_CLIPS,
                                "total_openat_files": 1 + N_CLIPS + N_CLIPS + (EPOCHS - 1) * N_CLIPS},
        "expected_bytes_written": int(S.sum()),
        "expected_write_calls": int(write_calls.sum()),
        "deterministic_order": True,
        "needs": [],
    }


def main():
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} DATA [--make|--truth]")
    data = sys.argv[1]
    if "--truth" in sys.argv[2:]:
        print(json.dumps(truth(), indent=2))
    elif "--make" in sys.argv[2:]:
        make(data)
    else:
        run(data)


if __name__ == "__main__":
    main()
