"""Action-recognition training with TSN-style sparse frame sampling from MJPEG-like video
container files whose frame index sits at the END of the file (like an MP4 without
"faststart": the moov atom after the media data). Every sample re-parses the container:
pread of the fixed header at offset 0, pread of the index table near EOF, then one pread
per sampled frame (8 variable-size byte ranges scattered through the file). A
ThreadPoolExecutor of 4 threads loads the samples of a batch, one batch ahead.

Data set (DATA/, about 39.3 MB):
  DATA/videos/vid_000.mjv .. vid_095.mjv   96 container files, 0.21-0.67 MB each.
  DATA/train_list.txt                       "vid_XXX.mjv LABEL NFRAMES" per line
                                            (96 lines, 1,668 bytes).
  Container layout: a 64-byte header (magic b"MJV1", uint32 nframes, uint16 width 112,
  uint16 height 112, uint32 fps 25, uint64 index_offset, uint64 index_bytes, zero pad),
  then the frames back to back ("JPEG" payloads: b"\\xff\\xd8" + random bytes, lognormal
  length, median 5 KiB, sigma 0.35, clipped to 1.5..24 KiB), then the index: nframes pairs
  of uint64 (offset, length), 16 bytes per frame. nframes uniform 40..120 per video.

Training: the main thread reads train_list.txt once. Each epoch draws 3 clips per video
(288 samples), shuffled (numpy rng seed 778 + epoch), batches of 8 (36 steps). A clip is
TSN sampling: the video's frames are cut into 8 equal segments and one frame is drawn at a
random position inside each segment (rng seeded per epoch and sample), so the 8 frames are
in ascending order, spread over the whole file. load_clip(): fd = os.open(path, O_RDONLY),
os.pread(fd, 64, 0) (header), os.pread(fd, index_bytes, index_offset) (whole index), then
os.pread(fd, length, offset) for each of the 8 frames in order, os.close. "Decoding" is a
checksum of the bytes. The batch's 8 samples are submitted to a ThreadPoolExecutor(4); the
main loop submits batch k+1 before waiting on batch k, then sleeps 30 ms per step. 4
epochs, 144 steps. No eval, no checkpoint, no writes.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek): train_list.txt
opened once by the main thread (lseek(0, SEEK_CUR), read(8192) = 1668, read(8192) = 0).
Then only the 4 pool threads (TIDs created on first use and reused for the whole run)
touch video files: per sample openat(vid_XXX.mjv, O_RDONLY|O_CLOEXEC), pread64(fd, 64, 0),
pread64(fd, 640..1920, INDEX_OFFSET) (the last 16*nframes bytes of the file), then 8
pread64(fd, 1.5..17 KiB, OFF) at strictly increasing offsets, close. No read() and no
lseek on video fds (the only other pread64s are ld.so loading extension modules at
start-up). So 10 preads per sample: header at 0, a jump to the file's tail, then a forward
skip through the media. Up to 16 samples (2 batches) are in flight; their opens/preads
interleave across threads. Each video is opened 3 times per epoch (1152 opens, 11,520
preads in all); per epoch 2,304 frame reads, about 13 MB of frame bytes plus 288 headers
and indexes (only ~1/3 of the 39 MB data set is touched per epoch; the exact frame set
varies by epoch).

Usage: video_tsn_segments_threads.py DATA [--make | --truth]
numpy only (runs with plain python3).
"""
import json
import os
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

N_VIDEOS, MIN_FR, MAX_FR, W, H, FPS = 96, 40, 120, 112, 112, 25
FRAME_MEDIAN, FRAME_SIGMA, FRAME_MIN, FRAME_MAX = 5 * 1024, 0.35, 1536, 24 * 1024
N_CLASSES, CLIPS_PER_VIDEO, SEGMENTS, BATCH, EPOCHS = 12, 3, 8, 8, 4
THREADS, COMPUTE_S = 4, 0.030
HEADER_BYTES, MAGIC = 64, b"MJV1"
SEED = 777


def video_meta():
    rng = np.random.default_rng(SEED)
    nfr = rng.integers(MIN_FR, MAX_FR + 1, N_VIDEOS)
    sizes = [np.clip(rng.lognormal(np.log(FRAME_MEDIAN), FRAME_SIGMA, n), FRAME_MIN,
                     FRAME_MAX).astype(np.int64) for n in nfr]
    labels = rng.integers(0, N_CLASSES, N_VIDEOS)
    return nfr, sizes, labels


def epoch_samples(epoch):
    rng = np.random.default_rng(SEED + 1 + epoch)
    s = np.repeat(np.arange(N_VIDEOS), CLIPS_PER_VIDEO)
    return s[rng.permutation(len(s))]


def tsn_indices(nframes, epoch, k):
    rng = np.random.default_rng((SEED, epoch, k))
    edges = np.linspace(0, nframes, SEGMENTS + 1)
    lo, hi = np.floor(edges[:-1]).astype(int), np.floor(edges[1:]).astype(int)
    return lo + (rng.random(SEGMENTS) * (hi - lo)).astype(int)


def truth(data):
    nfr, sizes, labels = video_meta()
    fbytes = np.concatenate(sizes)
    file_bytes = [HEADER_BYTES + int(s.sum()) + 16 * len(s) for s in sizes]
    per_epoch = []
    for e in range(EPOCHS):
        tot = 0
        for k, v in enumerate(epoch_samples(e)):
            idx = tsn_indices(int(nfr[v]), e, k)
            tot += HEADER_BYTES + 16 * int(nfr[v]) + int(sizes[v][idx].sum())
        per_epoch.append(tot)
    steps = N_VIDEOS * CLIPS_PER_VIDEO // BATCH
    return {
        "program": "video_tsn_segments_threads", "needs": [],
        "format": "MJPEG-like video container: 64-byte header, variable-size frames, "
                  "frame index (offset,length) table at end of file",
        "io_library": "os.open + os.pread (header, index, 8 frames) per sample",
        "data_layout": "DATA/videos/vid_000..095.mjv + DATA/train_list.txt",
        "num_files": N_VIDEOS, "samples_per_file": CLIPS_PER_VIDEO,
        "frames_per_file": {"dist": "uniform", "min": int(nfr.min()), "max": int(nfr.max()),
                            "total": int(nfr.sum())},
        "sample_size": {"distribution": "8 frames per sample, frame bytes lognormal "
                                        "(median 5 KiB, sigma 0.35, clip 1.5-24 KiB)",
                        "frame_mean_bytes": int(fbytes.mean()),
                        "frame_min_bytes": int(fbytes.min()),
                        "frame_max_bytes": int(fbytes.max()),
                        "mean_bytes": int(np.mean(per_epoch) / (N_VIDEOS * CLIPS_PER_VIDEO)),
                        "total_bytes": int(sum(file_bytes))},
        "batch_size": BATCH,
        "readers": {"kind": "ThreadPoolExecutor threads", "count": THREADS},
        "prefetch": {"batches_ahead": 1, "samples_in_flight_max": 2 * BATCH},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "3 clips per video, permuted per epoch (seed 778 + epoch); frame offsets "
                   "random within 8 segments (seeded per epoch and sample)",
        "eval": None, "checkpoint": None,
        "side_files": [{"path": "train_list.txt", "reads": "once"}],
        "read_pattern": "per sample: open, pread(64, 0), pread(16*nframes, index_offset near "
                        "EOF), 8 x pread(frame) at increasing offsets, close",
        "preads_per_sample": 2 + SEGMENTS,
        "opens_per_file_per_epoch": CLIPS_PER_VIDEO,
        "bytes_per_epoch": per_epoch,
    }


def make(data):
    vdir = os.path.join(data, "videos")
    os.makedirs(vdir, exist_ok=True)
    nfr, sizes, labels = video_meta()
    rng = np.random.default_rng(SEED + 100)
    with open(os.path.join(data, "train_list.txt"), "w") as lst:
        for v in range(N_VIDEOS):
            name = "vid_%03d.mjv" % v
            n = int(nfr[v])
            blob = rng.bytes(int(sizes[v].sum()))
            offs = HEADER_BYTES + np.concatenate([[0], np.cumsum(sizes[v])[:-1]])
            index_off = HEADER_BYTES + len(blob)
            with open(os.path.join(vdir, name), "wb") as f:
                hdr = MAGIC + struct.pack("<IHHIQQ", n, W, H, FPS, index_off, 16 * n)
                f.write(hdr.ljust(HEADER_BYTES, b"\0"))
                pos = 0
                for s in sizes[v]:
                    f.write(b"\xff\xd8" + blob[pos + 2:pos + int(s)])
                    pos += int(s)
                f.write(np.stack([offs, sizes[v]], axis=1).astype("<u8").tobytes())
            lst.write("%s %d %d\n" % (name, labels[v], n))


def load_clip(path, epoch, k):
    fd = os.open(path, os.O_RDONLY)
    try:
        hdr = os.pread(fd, HEADER_BYTES, 0)
        assert hdr[:4] == MAGIC
        n, w, h, fps, ioff, ibytes = struct.unpack("<IHHIQQ", hdr[4:32])
        index = np.frombuffer(os.pread(fd, ibytes, ioff), dtype="<u8").reshape(n, 2)
        acc = 0
        for i in tsn_indices(n, epoch, k):
            off, ln = int(index[i, 0]), int(index[i, 1])
            frame = os.pread(fd, ln, off)
            assert frame[:2] == b"\xff\xd8" and len(frame) == ln
            acc += ln + frame[ln // 2]
        return acc
    finally:
        os.close(fd)


def train(data):
    with open(os.path.join(data, "train_list.txt")) as f:
        rows = [line.split() for line in f]
    paths = [os.path.join(data, "videos", r[0]) for r in rows]
    labels = np.array([int(r[1]) for r in rows])
    steps, nbytes = 0, 0
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        for epoch in range(EPOCHS):
            order = epoch_samples(epoch)
            batches = [list(range(s, s + BATCH)) for s in range(0, len(order), BATCH)]

            def submit(b):
                return [pool.submit(load_clip, paths[order[k]], epoch, k) for k in b]

            pending = submit(batches[0])
            for i in range(len(batches)):
                nxt = submit(batches[i + 1]) if i + 1 < len(batches) else None
                nbytes += sum(fut.result() for fut in pending)
                y = labels[order[batches[i]]]
                time.sleep(COMPUTE_S)
                steps += 1
                pending = nxt
    print("video_tsn_segments_threads: %d steps, %d epochs, checksum %d"
          % (steps, EPOCHS, nbytes))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
