"""LiDAR-object classifier: per-sample .bin point clouds with a JSON sidecar,
CRC-validated in a torch DataLoader; corrupt samples are dropped in collate;
atomic torch.save checkpoints every 50 steps.

Data set (``--make``, seed 15002)
---------------------------------
``DATA/samples/NNNNNN.bin``  1,200 files, float32 points (x, y, z, intensity),
    N points each with N ~ uniform integer in [500, 5500] -> 16*N bytes,
    8,000 .. 88,000 bytes, mean ~48 KB; ~57.6 MB in all.
``DATA/samples/NNNNNN.json`` 1,200 sidecars (89-93 bytes each):
    ``{"label": int, "num_points": N, "dtype": "float32", "shape": [N, 4],
    "crc32": int}``.
36 samples (3 %) are deliberately corrupt: 18 .bin files are truncated to
a random fraction (40-90 %) of their size and 18 have 64 bytes overwritten
after the CRC was computed (size correct, CRC mismatch).

Training loop
-------------
``torch.utils.data.DataLoader(ds, batch_size=16, shuffle=True (seeded
generator), num_workers=2, prefetch_factor=2, collate_fn=pad_collate,
persistent_workers=False)``.  ``__getitem__(i)``: open + ``json.load`` the
sidecar, then open the .bin and ``f.read()`` it whole, check
``len == 16*num_points`` and ``zlib.crc32``; on mismatch it returns None.
``pad_collate`` drops the Nones, sub-samples clouds to <= 4,096 points and
zero-pads to the longest cloud in the batch.  1,200 / 16 = 75 steps per
epoch (some batches have < 16 valid samples), 3 epochs, 225 steps; the
worker processes are re-forked at every epoch.  Compute: tiny MLP forward
plus ``time.sleep(0.015)`` per step.  Every 50 global steps (steps 50, 100,
150, 200 -> 4 times) the model+optimizer state (~0.56 MB) is written with
``torch.save`` to ``DATA/checkpoints/last.pt.tmp`` and then
``os.replace``d onto ``DATA/checkpoints/last.pt`` -- the only thing the run
writes into DATA.  No eval.

What a syscall trace sees (measured with strace, torch 2.x)
-----------------------------------------------------------
* Reads happen in the 2 DataLoader worker processes (forked per epoch),
  never in the main process (except checkpoint writes).
* Per sample (3,600 over the run, 7,200 data ``openat`` O_RDONLY):
  ``openat`` NNNNNN.json, ``newfstatat``, 2x ``lseek(0, SEEK_CUR)``, one
  ``read`` of st_size+1 bytes returning the whole sidecar (89-93 B) and a
  1-byte read returning 0 (EOF), ``close``; then the same for NNNNNN.bin:
  one ``read`` returning the whole file (8,080-87,968 bytes; shorter for
  the 18 truncated ones) + a 0-byte EOF read, ``close``.
  Files are visited in a random order that changes every epoch; each worker
  handles whole batches (16 consecutive samples of the permutation).
* 171.1 MB read over the run (3 x 57.0 MB of .bin + 0.33 MB of JSON).
* Every 50 steps (4 times) the main process: ``openat(last.pt.tmp,
  O_WRONLY|O_CREAT|O_TRUNC)``, ~12 ``writev`` calls (one per zip member:
  64-byte local header + tensor payload, the two 256x256 weight tensors as
  262,208-byte writevs) + one ``write`` for the zip end records, ~0.56 MB in
  all, ``close``, ``rename(last.pt.tmp, last.pt)``.
* No mmap or pread64 on data files.
"""
import json
import os
import sys
import time
import zlib

import numpy as np

N_SAMPLES = 1200
MIN_PTS, MAX_PTS = 500, 5500
N_TRUNC = 18
N_FLIP = 18
BATCH = 16
WORKERS = 2
PREFETCH = 2
EPOCHS = 3
COMPUTE_S = 0.015
CKPT_EVERY = 50
MAX_KEEP = 4096
SEED = 15002


def point_counts():
    return np.random.default_rng(SEED).integers(MIN_PTS, MAX_PTS + 1, size=N_SAMPLES)


def make(data):
    d = os.path.join(data, "samples")
    os.makedirs(d, exist_ok=True)
    counts = point_counts()
    rng = np.random.default_rng(SEED + 1)
    bad = rng.permutation(N_SAMPLES)[:N_TRUNC + N_FLIP]
    trunc, flip = set(bad[:N_TRUNC].tolist()), set(bad[N_TRUNC:].tolist())
    for i, n in enumerate(counts):
        label = int(rng.integers(0, 10))
        pts = rng.standard_normal((int(n), 4)).astype(np.float32)
        pts[:, :3] *= 1.0 + label * 0.1
        raw = pts.tobytes()
        meta = {"label": label, "num_points": int(n), "dtype": "float32",
                "shape": [int(n), 4], "crc32": zlib.crc32(raw)}
        if i in trunc:
            raw = raw[:int(len(raw) * rng.uniform(0.4, 0.9))]
        elif i in flip:
            off = int(rng.integers(0, len(raw) - 64))
            raw = raw[:off] + rng.bytes(64) + raw[off + 64:]
        with open(os.path.join(d, "%06d.bin" % i), "wb") as f:
            f.write(raw)
        with open(os.path.join(d, "%06d.json" % i), "w") as f:
            json.dump(meta, f)


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)

    class PointClouds(Dataset):
        def __init__(self, root):
            self.root = os.path.join(root, "samples")

        def __len__(self):
            return N_SAMPLES

        def __getitem__(self, i):
            with open(os.path.join(self.root, "%06d.json" % i)) as f:
                meta = json.load(f)
            with open(os.path.join(self.root, "%06d.bin" % i), "rb") as f:
                raw = f.read()
            if len(raw) != 16 * meta["num_points"] or zlib.crc32(raw) != meta["crc32"]:
                return None
            pts = np.frombuffer(raw, dtype=np.float32).reshape(meta["shape"])
            return pts, meta["label"], i

    def pad_collate(items):
        items = [it for it in items if it is not None]
        if not items:
            return None
        clouds = []
        for pts, _, idx in items:
            if len(pts) > MAX_KEEP:
                sel = np.random.default_rng(idx).choice(len(pts), MAX_KEEP, replace=False)
                pts = pts[np.sort(sel)]
            clouds.append(pts)
        n = max(len(c) for c in clouds)
        x = torch.zeros(len(clouds), n, 4)
        mask = torch.zeros(len(clouds), n, dtype=torch.bool)
        for j, c in enumerate(clouds):
            x[j, :len(c)] = torch.from_numpy(np.array(c))
            mask[j, :len(c)] = True
        y = torch.tensor([lab for _, lab, _ in items])
        return x, mask, y

    g = torch.Generator()
    g.manual_seed(0)
    loader = DataLoader(PointClouds(data), batch_size=BATCH, shuffle=True, generator=g,
                        num_workers=WORKERS, prefetch_factor=PREFETCH,
                        collate_fn=pad_collate, persistent_workers=False)
    model = torch.nn.Sequential(torch.nn.Linear(4, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    ckdir = os.path.join(data, "checkpoints")
    os.makedirs(ckdir, exist_ok=True)
    step, dropped, t0 = 0, 0, time.time()
    for epoch in range(EPOCHS):
        for batch in loader:
            if batch is None:
                continue
            x, mask, y = batch
            dropped += BATCH - len(y) if len(y) < BATCH else 0
            with torch.no_grad():
                feat = model[0](x[:, :64]).mean(1)
            loss = torch.nn.functional.cross_entropy(model[2:](feat.detach().requires_grad_()), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(COMPUTE_S)
            step += 1
            if step % CKPT_EVERY == 0:
                tmp = os.path.join(ckdir, "last.pt.tmp")
                torch.save({"step": step, "epoch": epoch, "model": model.state_dict(),
                            "optim": opt.state_dict()}, tmp)
                os.replace(tmp, os.path.join(ckdir, "last.pt"))
        print("epoch %d: steps %d, dropped so far %d, %.2fs" % (epoch, step, dropped, time.time() - t0))
    print("trained %d steps in %.2fs" % (step, time.time() - t0))


def truth():
    sizes = 16 * point_counts()
    spe = -(-N_SAMPLES // BATCH)
    return {
        "program": "pointcloud_sidecar_json_crc_drop",
        "needs": ["torch"],
        "format": "raw float32 .bin per sample + JSON sidecar per sample",
        "io_library": "python open/read + json (torch DataLoader)",
        "data_layout": "one directory, 1200 NNNNNN.bin + 1200 NNNNNN.json; 36 corrupt samples dropped at collate",
        "num_files": 2 * N_SAMPLES,
        "samples_per_file": 1,
        "files_per_sample": 2,
        "sample_size": {"dist": "uniform", "min": int(sizes.min()), "max": int(sizes.max()),
                        "mean": float(sizes.mean())},
        "sidecar_size_bytes": "89-93",
        "corrupt_samples": N_TRUNC + N_FLIP,
        "batch_size": BATCH,
        "readers": {"kind": "process", "count": WORKERS},
        "prefetch": PREFETCH,
        "epochs": EPOCHS,
        "steps_per_epoch": spe,
        "total_steps": EPOCHS * spe,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": True,
        "eval": None,
        "checkpoint": {"every_steps": CKPT_EVERY, "count": EPOCHS * spe // CKPT_EVERY,
                       "path": "DATA/checkpoints/last.pt", "method": "torch.save to .tmp then os.replace",
                       "approx_bytes": 556000},
    }


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: pointcloud_sidecar_json_crc_drop.py DATA [--make|--truth]")
    if "--truth" in sys.argv:
        print(json.dumps(truth()))
    elif "--make" in sys.argv:
        make(sys.argv[1])
    else:
        train(sys.argv[1])
