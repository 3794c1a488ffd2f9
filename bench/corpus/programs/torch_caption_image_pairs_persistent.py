"""CLIP-style image-text contrastive training from a folder of PAIRED files: every sample is
two files with the same stem, a small JSON caption file (NNNNN.json, 124-356 bytes) and a
larger binary image file (NNNNN.img, bimodal sizes: web thumbnails vs full-resolution
photos). A torch DataLoader with 2 PERSISTENT worker processes and prefetch_factor=4 loads
them: per sample the worker opens and json.load()s the caption, then opens the image,
reads its 16-byte header and then the payload through Python's buffered reader (whose
buffer is st_blksize = 4 KiB here). The main loop appends a metrics line to a JSONL log
every 10 steps.

Data set (DATA/, about 51.7 MB):
  DATA/index.txt          800 stems ("00000" .. "00799", one per line, 4,800 bytes), read
                          once by the main process.
  DATA/pairs/NNNNN.json   800 caption files: {"id", "caption" (8-40 random words),
                          "tags" (1-5 words), "h", "w", "nbytes"}; 124-356 bytes
                          (mean 235).
  DATA/pairs/NNNNN.img    800 image files: 16-byte header (b"IMG0", uint16 h, uint16 w,
                          uint32 payload bytes, 4 zero bytes) + payload. BIMODAL payload
                          size: 80% thumbnails lognormal (median 28 KiB, sigma 0.35),
                          20% full-res lognormal (median 180 KiB, sigma 0.25), clipped to
                          4-400 KiB: image files 8,576-354,337 bytes, mean 64,358.
                          Captions + images: 51,675,434 bytes.
  DATA/logs/metrics.jsonl written by training (appended; removed at the start of a run).

Training: the main process reads index.txt. DataLoader(PairDataset, batch_size=16,
shuffle=True (RandomSampler, torch generator seeded 2718, new permutation per epoch),
num_workers=2, persistent_workers=True, prefetch_factor=4, fork, collate: stack of 3 x 64
x 64 uint8 "decoded" images + padded int64 token ids (max 48) of the captions).
__getitem__(i): with open(stem.json) as f: meta = json.load(f); with open(stem.img, "rb")
as f: hdr = f.read(16); payload = f.read(nbytes) (both files opened per sample, closed
right after). 50 steps per epoch, 15 ms sleep per step, 3 epochs, 150 steps. Every 10
steps the main process appends one JSON line (50-55 bytes) to logs/metrics.jsonl (opened
once in append mode, flushed after each line). No model checkpoint.

What a syscall trace sees (strace -ff -e trace=openat,read,pread64,lseek,close,write,fstat):
the main process reads index.txt once (read(8192) = 4800, read(8192) = 0) and writes the
log; the 2 worker processes (forked ONCE, at the first epoch, persistent) read all the
pairs. Batches alternate between the workers (25 batches = 400 samples = 800 files each
per epoch); each worker keeps 4 batches in flight, so every epoch starts with a burst of
8 batches (128 samples, 256 file opens) as soon as the epoch's iterator is created;
the persistent workers stay alive (and keep their pids) between epochs, so there is no
re-fork and no re-import at epoch boundaries. Per sample, in one worker, two files back
to back:
  caption: openat(NNNNN.json, O_RDONLY|O_CLOEXEC), fstat, ioctl(TCGETS), lseek(0,
  SEEK_CUR) (text-mode open), lseek(0, SEEK_CUR), fstat, read(size + 1) -> size,
  read(1) -> 0 (json.load = f.read(), readall sized from fstat), close.
  image: openat(NNNNN.img, O_RDONLY|O_CLOEXEC), fstat, ioctl(TCGETS), lseek(0, SEEK_CUR),
  read(4096) (the buffered reader fills its 4 KiB buffer to serve the 16-byte header),
  then f.read(nbytes): 4,080 bytes come from the buffer, the rest is read straight into
  the result in ONE read of (remaining rounded down to 4 KiB) (4,096-348,160 bytes, e.g.
  28672), and the tail (< 4 KiB) through ONE more read(4096) that returns exactly the
  tail (no EOF read); close. E.g. 00000.img (34,350 bytes): read(4096) = 4096,
  read(28672) = 28672, read(4096) = 1582.
So per sample 2 opens, 2 closes, 5 reads (2 caption + 3 image), 3 lseeks, 3 fstats;
each file of both kinds read exactly once per epoch, sequentially to its end. Per epoch:
1,600 opens (800 .json + 800 .img), 4,000 reads, 51,675,434 bytes (51,487,090 of images
+ 188,344 of captions); over the run 4,800 opens, 12,000 reads (2,400 x read(1) = 0 EOF
probes on captions), 155,026,302 bytes; the two workers read 1,200 samples each. The
order is random (a new permutation per epoch); the two files of a pair are always read
back to back by the same worker. The log: openat(logs/metrics.jsonl,
O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC) once by the main process, 15 write()s of 50-55 bytes
(802 bytes), close at the end. No pread, no mmap, no lseek with a nonzero offset.

Usage: torch_caption_image_pairs_persistent.py DATA [--make | --truth]
needs torch (run with /opt/dlio-reference/venv/bin/python).
"""
import json
import os
import struct
import sys
import time

import numpy as np

N_PAIRS, HDR = 800, 16
THUMB_FRAC, THUMB_MED, THUMB_SIG = 0.8, 28 * 1024, 0.35
FULL_MED, FULL_SIG, P_MIN, P_MAX = 180 * 1024, 0.25, 4 * 1024, 400 * 1024
BATCH, EPOCHS, WORKERS, PREFETCH, MAX_TOK, LOG_EVERY = 16, 3, 2, 4, 48, 10
COMPUTE_S = 0.015
SEED = 2718
WORDS = ("a photo of the small large red blue green dog cat bird car street tree house "
         "river mountain person bicycle boat sunset night city beach snow flower table "
         "on in near with under two three old young running sitting standing").split()


def pair_meta():
    rng = np.random.default_rng(SEED)
    thumb = rng.random(N_PAIRS) < THUMB_FRAC
    pay = np.where(thumb, rng.lognormal(np.log(THUMB_MED), THUMB_SIG, N_PAIRS),
                   rng.lognormal(np.log(FULL_MED), FULL_SIG, N_PAIRS))
    pay = np.clip(pay, P_MIN, P_MAX).astype(np.int64)
    hw = np.where(thumb, 256, 1024)
    captions = []
    for i in range(N_PAIRS):
        words = rng.choice(WORDS, int(rng.integers(8, 41)))
        tags = rng.choice(WORDS, int(rng.integers(1, 6)))
        captions.append(json.dumps({"id": "%05d" % i, "caption": " ".join(words),
                                    "tags": list(tags), "h": int(hw[i]), "w": int(hw[i]),
                                    "nbytes": int(pay[i])}))
    return pay, captions


def truth(data):
    pay, caps = pair_meta()
    cap_b = np.array([len(c.encode()) for c in caps])
    img_b = pay + HDR
    steps = N_PAIRS // BATCH
    return {
        "program": "torch_caption_image_pairs_persistent", "needs": ["torch"],
        "format": "paired files per sample: NNNNN.json caption + NNNNN.img binary image "
                  "(16-byte header + payload)",
        "io_library": "json.load(open(...)) + buffered open(...,'rb').read(16)/.read(n) "
                      "in torch DataLoader workers",
        "data_layout": "DATA/index.txt, DATA/pairs/NNNNN.{json,img}",
        "num_files": 2 * N_PAIRS, "files_per_sample": 2, "samples_per_file": 1,
        "sample_size": {"distribution": "image payload bimodal: 80% lognormal median 28 "
                                        "KiB, 20% lognormal median 180 KiB; caption "
                                        "JSON 124-356 bytes",
                        "image_mean_bytes": int(img_b.mean()),
                        "image_min_bytes": int(img_b.min()),
                        "image_max_bytes": int(img_b.max()),
                        "caption_mean_bytes": int(cap_b.mean()),
                        "caption_min_bytes": int(cap_b.min()),
                        "caption_max_bytes": int(cap_b.max()),
                        "total_bytes": int(img_b.sum() + cap_b.sum())},
        "batch_size": BATCH,
        "readers": {"kind": "torch DataLoader worker processes (fork, persistent)",
                    "count": WORKERS, "processes_over_run": WORKERS},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": WORKERS * PREFETCH},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "RandomSampler, torch generator seeded 2718 (new permutation per epoch)",
        "checkpoint": None,
        "writes": {"path": "logs/metrics.jsonl", "mode": "append", "every_steps": LOG_EVERY,
                   "count": EPOCHS * steps // LOG_EVERY, "process": "main"},
        "side_files": [{"path": "index.txt", "reads": "once, main process"}],
        "read_pattern": "per sample: open+read caption json (read(size+1), read(1)), "
                        "open image, read(4096), read(remaining rounded down to 4 KiB), "
                        "read(4096) short tail; both files reopened every epoch",
        "reads_per_sample": 5,
        "opens_per_sample": 2,
        "opens_per_epoch": 2 * N_PAIRS,
        "bytes_per_epoch": int(img_b.sum() + cap_b.sum()),
        "image_bytes_per_epoch": int(img_b.sum()),
        "caption_bytes_per_epoch": int(cap_b.sum()),
    }


def make(data):
    pay, caps = pair_meta()
    d = os.path.join(data, "pairs")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(SEED + 5)
    for i in range(N_PAIRS):
        with open(os.path.join(d, "%05d.json" % i), "w") as f:
            f.write(caps[i])
        hw = json.loads(caps[i])["h"]
        with open(os.path.join(d, "%05d.img" % i), "wb") as f:
            f.write(b"IMG0" + struct.pack("<HHI4x", hw, hw, int(pay[i])))
            f.write(rng.bytes(int(pay[i])))
    with open(os.path.join(data, "index.txt"), "w") as f:
        f.write("".join("%05d\n" % i for i in range(N_PAIRS)))


class PairDataset:
    def __init__(self, root, stems):
        self.root, self.stems = os.path.join(root, "pairs"), stems
        self.vocab = {w: k + 1 for k, w in enumerate(WORDS)}

    def __len__(self):
        return len(self.stems)

    def __getitem__(self, i):
        import torch
        stem = self.stems[i]
        with open(os.path.join(self.root, stem + ".json")) as f:
            meta = json.load(f)
        with open(os.path.join(self.root, stem + ".img"), "rb") as f:
            hdr = f.read(HDR)
            assert hdr[:4] == b"IMG0"
            h, w, n = struct.unpack("<HHI", hdr[4:12])
            payload = f.read(n)
        assert len(payload) == n == meta["nbytes"]
        img = np.resize(np.frombuffer(payload, dtype=np.uint8), (3, 64, 64))
        toks = [self.vocab.get(t, 0) for t in meta["caption"].split()][:MAX_TOK]
        return torch.from_numpy(img.copy()), torch.tensor(toks, dtype=torch.int64)


def collate(items):
    import torch
    toks = torch.zeros(len(items), MAX_TOK, dtype=torch.int64)
    for j, (_, t) in enumerate(items):
        toks[j, :len(t)] = t
    return torch.stack([x for x, _ in items]), toks


def train(data):
    import torch
    from torch.utils.data import DataLoader
    with open(os.path.join(data, "index.txt")) as f:
        stems = [s.strip() for s in f if s.strip()]
    g = torch.Generator().manual_seed(SEED)
    loader = DataLoader(PairDataset(data, stems), batch_size=BATCH, shuffle=True,
                        generator=g, num_workers=WORKERS, persistent_workers=True,
                        prefetch_factor=PREFETCH, multiprocessing_context="fork",
                        collate_fn=collate)
    logdir = os.path.join(data, "logs")
    os.makedirs(logdir, exist_ok=True)
    logpath = os.path.join(logdir, "metrics.jsonl")
    if os.path.exists(logpath):
        os.remove(logpath)
    steps, seen, acc = 0, 0, 0
    t0 = time.time()
    with open(logpath, "a") as log:
        for epoch in range(EPOCHS):
            for imgs, toks in loader:
                assert imgs.shape == (BATCH, 3, 64, 64) and toks.shape == (BATCH, MAX_TOK)
                acc += int(toks.sum())
                seen += BATCH
                time.sleep(COMPUTE_S)
                steps += 1
                if steps % LOG_EVERY == 0:
                    log.write(json.dumps({"step": steps, "epoch": epoch,
                                          "loss": round(4.0 / (1 + 0.01 * steps), 5),
                                          "t": round(time.time() - t0, 3)}) + "\n")
                    log.flush()
    print("torch_caption_image_pairs_persistent: %d steps, %d samples, token sum %d"
          % (steps, seen, acc))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
