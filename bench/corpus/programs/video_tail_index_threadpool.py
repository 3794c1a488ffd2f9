"""Video action-recognition clip loader over per-video container files whose frame index sits
at the END of the file (like an MP4 written without "faststart": the moov box, i.e. the
sample table, comes after the media data). For every training sample a reader thread opens
the container, seeks to end - 4 KiB and reads the 4 KiB index footer, then seeks to and
reads 4 frames (stride 2) of a random clip using the offsets from that index, and closes
the file. A ThreadPoolExecutor of 2 readers loads the batches, one batch ahead of the
training loop; every 10 training steps a validation pass reads one fixed clip from each
video in a separate val/ folder through the same pool.

Data set (DATA/, about 33.4 MB):
  DATA/train/vid_NNNN.vcx   56 containers; DATA/val/vid_NNNN.vcx   10 containers.
  Container: 64-byte header (b"VCX1", uint32 version, w, h, fps, n_frames, zero pad), then
  n_frames frame payloads back to back (n_frames uniform 48-120), then the 4096-byte
  footer: b"VIDX", uint32 n_frames, n_frames x (uint64 offset, uint32 size, uint8 key,
  3 pad) entries, zero padding, and the last 8 bytes uint32 4096 + b"XDIV".
  Frame sizes are LOGNORMAL: keyframes (every 12th frame) median 20 KiB (sigma 0.3),
  delta frames median 4 KiB (sigma 0.6), clipped to 512 B - 64 KiB (drawn: 512 -
  49,566 bytes, mean 6,351). Train files 279,156-796,216 bytes (28,318,881 in all); val
  files 5,113,126 bytes in all.

Training: 3 epochs. Per epoch each training video yields 4 clips with random start frames
(numpy rng seeded 1717 + epoch), the 224 (video, start) pairs are shuffled and cut into
batches of 8 -> 28 steps per epoch, 84 steps in all, 32 ms sleep per step. Clip = frames
start, start+2, start+4, start+6 (start <= n_frames - 7). Loader (per sample, on a pool
thread): f = open(path, "rb", buffering=0); f.seek(-4096, SEEK_END); footer =
f.read(4096); parse; for each of the 4 frames: f.seek(offset); f.read(size); close;
"decode" = tile the bytes into 3 x 32 x 32. The main thread submits batch k+1 to the pool
before waiting for batch k. Validation after steps 10, 20, ..., 80 (8 passes): the 10 val
videos, clip start = n_frames // 2, as ONE batch of 10 on the same 2-thread pool, 8 ms
sleep. No checkpoint, no writes.

What a syscall trace sees (strace -ff -e trace=openat,read,pread64,lseek,close,write,fstat):
one process; the main thread does no data I/O (it only lists train/ and val/ once); the 2
pool threads (created at the first batch, reused to the end) do all of it, sharing the
samples of each batch (they pull from one task queue, so the split is uneven, roughly half
each). Per sample: openat(vid.vcx, O_RDONLY|O_CLOEXEC), fstat, lseek(fd, -4096, SEEK_END)
(returns size - 4096), read(fd, 4096), then 4 x [lseek(fd, OFFSET, SEEK_SET), read(fd,
SIZE)] with OFFSET increasing (the frames lie BEFORE the footer, so the file is read
"backwards, then forwards": footer first, then 4 frame reads at ascending offsets with
gaps of one skipped frame each), close. So 5 reads + 5 lseeks per sample, one 4096-byte
read at the tail of the file and 4 reads of lognormal size (512 B - 49.6 KB; a clip covers
a keyframe about 1/3 of the time, so one of its 4 reads is then ~20 KiB); files are
reopened for every clip and each training video is opened 4 times per epoch (random clips
may overlap). Per epoch 224 opens, 1,120 reads, 1,120 lseeks, 6,313,151 / 6,423,065 /
6,450,802 bytes (917,504 of them footers) out of a 28.3 MB train folder (at most ~22% of
the train bytes are touched per epoch). Per validation: 10 opens, 50 reads, 329,099 bytes,
the SAME bytes every time (fixed clips); it interleaves with the pool's prefetch of the
next train batch. 80 val opens / 400 reads / 2,632,792 bytes over the run. The two threads
split the samples unevenly (e.g. 285 / 387 train samples over a run). Totals: 752 opens,
3,760 reads, 3,760 lseeks, 21,819,810 bytes. No pread, no mmap, no writes.

Usage: video_tail_index_threadpool.py DATA [--make | --truth]
numpy only (runs with plain python3).
"""
import json
import os
import struct
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

N_TRAIN, N_VAL, HDR, FOOT = 56, 10, 64, 4096
NF_MIN, NF_MAX, KEY_EVERY = 48, 120, 12
KEY_MED, KEY_SIG, DELTA_MED, DELTA_SIG = 20 * 1024, 0.3, 4 * 1024, 0.6
F_MIN, F_MAX = 512, 64 * 1024
CLIP_LEN, STRIDE, CLIPS_PER_VIDEO = 4, 2, 4
BATCH, EPOCHS, THREADS, VAL_EVERY = 8, 3, 2, 10
COMPUTE_S, EVAL_S = 0.032, 0.008
SEED = 1717


def video_meta(split):
    n = N_TRAIN if split == "train" else N_VAL
    rng = np.random.default_rng((SEED, 0 if split == "train" else 1))
    out = []
    for _ in range(n):
        nf = int(rng.integers(NF_MIN, NF_MAX + 1))
        key = np.arange(nf) % KEY_EVERY == 0
        sz = np.where(key, rng.lognormal(np.log(KEY_MED), KEY_SIG, nf),
                      rng.lognormal(np.log(DELTA_MED), DELTA_SIG, nf))
        sz = np.clip(sz, F_MIN, F_MAX).astype(np.int64)
        offs = HDR + np.concatenate([[0], np.cumsum(sz)[:-1]])
        out.append((nf, offs, sz, key))
    return out


def epoch_plan(epoch, vids):
    rng = np.random.default_rng(SEED + epoch)
    pairs = [(v, int(rng.integers(0, vids[v][0] - STRIDE * (CLIP_LEN - 1))))
             for v in range(N_TRAIN) for _ in range(CLIPS_PER_VIDEO)]
    order = rng.permutation(len(pairs))
    return [pairs[i] for i in order]


def clip_frames(start):
    return [start + STRIDE * k for k in range(CLIP_LEN)]


def truth(data):
    tv, vv = video_meta("train"), video_meta("val")
    fsize = [HDR + int(sz.sum()) + FOOT for _, _, sz, _ in tv]
    vsize = [HDR + int(sz.sum()) + FOOT for _, _, sz, _ in vv]
    steps = N_TRAIN * CLIPS_PER_VIDEO // BATCH
    ep_bytes = []
    for e in range(EPOCHS):
        ep_bytes.append(sum(FOOT + int(tv[v][2][clip_frames(s)].sum())
                            for v, s in epoch_plan(e, tv)))
    val_bytes = sum(FOOT + int(vv[v][2][clip_frames(vv[v][0] // 2)].sum())
                    for v in range(N_VAL))
    n_val = (EPOCHS * steps) // VAL_EVERY
    fr = np.concatenate([sz for _, _, sz, _ in tv])
    return {
        "program": "video_tail_index_threadpool", "needs": [],
        "format": "per-video container: 64-byte header, frame payloads, 4 KiB index footer "
                  "at the END of the file (moov-at-end MP4-like)",
        "io_library": "unbuffered Python file objects: seek(-4096, SEEK_END)+read(4096), "
                      "then seek+read per frame; ThreadPoolExecutor",
        "data_layout": "DATA/train/vid_NNNN.vcx (56), DATA/val/vid_NNNN.vcx (10)",
        "num_files": N_TRAIN, "num_val_files": N_VAL,
        "samples_per_file": "3 random clips per video per epoch (4 frames, stride 2)",
        "file_bytes": {"train_total": sum(fsize), "train_min": min(fsize),
                       "train_max": max(fsize), "val_total": sum(vsize)},
        "sample_size": {"distribution": "frame sizes lognormal (key median 20 KiB, delta "
                                        "median 4 KiB), 4 frames + 4 KiB footer per sample",
                        "frame_mean_bytes": int(fr.mean()), "frame_min_bytes": int(fr.min()),
                        "frame_max_bytes": int(fr.max()),
                        "mean_bytes_per_sample": int(np.mean(ep_bytes) / (steps * BATCH))},
        "batch_size": BATCH,
        "readers": {"kind": "ThreadPoolExecutor threads (same process)", "count": THREADS},
        "prefetch": {"batches_ahead": 1},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "random clip starts + permutation per epoch (numpy seed 1717 + epoch)",
        "eval": {"when": "every %d train steps" % VAL_EVERY, "passes": n_val,
                 "folder": "DATA/val", "samples": N_VAL, "batch_size": N_VAL,
                 "clip": "fixed (start = n_frames // 2)", "compute_s_per_step": EVAL_S,
                 "bytes_per_pass": val_bytes, "readers": "same 2-thread pool"},
        "checkpoint": None,
        "read_pattern": "per sample: openat, lseek(-4096, SEEK_END), read(4096) footer, "
                        "then 4 x (lseek SEEK_SET, read(frame size)) at ascending offsets "
                        "before the footer, close",
        "opens_per_sample": 1, "reads_per_sample": 1 + CLIP_LEN,
        "lseeks_per_sample": 1 + CLIP_LEN,
        "bytes_per_epoch": ep_bytes,
        "opens_total": EPOCHS * steps * BATCH + n_val * N_VAL,
        "reads_total": (EPOCHS * steps * BATCH + n_val * N_VAL) * (1 + CLIP_LEN),
        "bytes_total": sum(ep_bytes) + n_val * val_bytes,
    }


def make(data):
    rng = np.random.default_rng(SEED + 99)
    for split in ("train", "val"):
        d = os.path.join(data, split)
        os.makedirs(d, exist_ok=True)
        for v, (nf, offs, sz, key) in enumerate(video_meta(split)):
            hdr = (b"VCX1" + struct.pack("<IIIII", 1, 224, 224, 25, nf)).ljust(HDR, b"\0")
            foot = b"VIDX" + struct.pack("<I", nf) + b"".join(
                struct.pack("<QIB3x", int(offs[i]), int(sz[i]), int(key[i]))
                for i in range(nf))
            foot = foot.ljust(FOOT - 8, b"\0") + struct.pack("<I", FOOT) + b"XDIV"
            with open(os.path.join(d, "vid_%04d.vcx" % v), "wb") as f:
                f.write(hdr)
                for i in range(nf):
                    f.write(struct.pack("<I", i) + rng.bytes(int(sz[i]) - 4))
                assert f.tell() == HDR + int(sz.sum())
                f.write(foot)


def load_clip(path, start):
    with open(path, "rb", buffering=0) as f:
        f.seek(-FOOT, os.SEEK_END)
        foot = f.read(FOOT)
        assert foot[:4] == b"VIDX" and foot[-4:] == b"XDIV", path
        nf = struct.unpack("<I", foot[4:8])[0]
        frames = []
        for i in clip_frames(start):
            assert i < nf
            off, size, key = struct.unpack("<QIB3x", foot[8 + 16 * i:24 + 16 * i])
            f.seek(off)
            b = f.read(size)
            assert struct.unpack("<I", b[:4])[0] == i
            frames.append(np.resize(np.frombuffer(b, dtype=np.uint8), (3, 32, 32)))
    return np.stack(frames), zlib.adler32(frames[0].tobytes())


def train(data):
    tv, vv = video_meta("train"), video_meta("val")
    tdir, vdir = os.path.join(data, "train"), os.path.join(data, "val")
    assert len(os.listdir(vdir)) == N_VAL and len(os.listdir(tdir)) == N_TRAIN
    steps, acc, nval = 0, 0, 0

    def job(item):
        v, s = item
        return load_clip(os.path.join(tdir, "vid_%04d.vcx" % v), s)

    # fixed val clips: start = n_frames // 2 (n_frames is part of the data set's catalogue)
    vitems = [(os.path.join(vdir, "vid_%04d.vcx" % v), vv[v][0] // 2) for v in range(N_VAL)]
    with ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="clip-reader") as pool:
        for epoch in range(EPOCHS):
            plan = epoch_plan(epoch, tv)
            batches = [plan[i:i + BATCH] for i in range(0, len(plan), BATCH)]
            pending = pool.map(job, batches[0])
            for k in range(len(batches)):
                nxt = pool.map(job, batches[k + 1]) if k + 1 < len(batches) else None
                res = list(pending)
                x = np.stack([r[0] for r in res]).astype(np.float32)
                assert x.shape == (BATCH, CLIP_LEN, 3, 32, 32)
                acc += sum(r[1] for r in res)
                time.sleep(COMPUTE_S)
                steps += 1
                if steps % VAL_EVERY == 0:
                    vres = list(pool.map(lambda it: load_clip(*it), vitems))
                    nval += len(vres)
                    time.sleep(EVAL_S)
                pending = nxt
    print("video_tail_index_threadpool: %d steps, %d val clips, checksum %d"
          % (steps, nval, acc))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
