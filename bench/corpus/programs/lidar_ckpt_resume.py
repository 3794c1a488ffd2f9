"""lidar_ckpt_resume.py -- KITTI-style LiDAR point clouds + sharded checkpoint resume/save.

A point-cloud classifier fine-tuned from a sharded ("ZeRO/FSDP flat-param")
checkpoint.  The run (1) resumes: reads a `latest` pointer, a metadata.json
and four torch shard files loaded with torch.load(mmap=True); (2) trains on
KITTI-velodyne-style .bin scans (float32 x,y,z,intensity, varying point
counts) loaded with np.fromfile in a num_workers=0 DataLoader; (3) every 25
steps and at the end writes a new sharded checkpoint into a temporary
directory (torch.save into an open file, flush, fsync), then publishes it
with an atomic directory rename and an atomic replace of the `latest`
pointer, keeping only the two newest checkpoints.

Data set layout (DATA/)
-----------------------
  velodyne/000000.bin .. 000295.bin   296 scans, N points x 4 float32 = 16*N
      bytes, N ~ Uniform{4096 .. 24575} (seed 14005; N is bumped by one when it
      is a multiple of 256 so no file is 4 KiB aligned).  66,256 .. 393,008
      bytes per scan, mean 231,722, 68,589,712 bytes in total.
  labels.txt          "<frame_id> <class>" per line, 296 lines x 11 = 3,256 bytes.
  pretrained/latest   "ckpt-000000" (11 bytes, no newline)
  pretrained/ckpt-000000/metadata.json   parameter names/shapes/offsets into
      the flat parameter, shard sizes (864 bytes).
  pretrained/ckpt-000000/shard_0.pt .. shard_3.pt  each holds
      {"flat_param": float32[464186], "momentum": float32[464186], "shard": k}
      (F = 1,856,744 flat parameters split in 4; 1,856,744 bytes per tensor),
      torch zip format, 3,715,301 bytes per file.

Training loop
-------------
  Resume from DATA/pretrained (see below); DATA/run is deleted first so every
  run starts from the same state.  DataLoader(num_workers=0, batch_size=8,
  shuffle=True with torch.Generator seeded 14005, drop_last=True): 296 / 8 =
  37 steps per epoch (no scan dropped), 2 epochs = 74 steps.
  __getitem__ = np.fromfile(scan, float32).reshape(-1, 4) then a seeded random
  subsample to 4096 points; each step sleeps 0.030 s of simulated compute and
  applies a fake momentum update to the flat parameter.  Checkpoints after
  steps 25, 50 and 74 into DATA/run/ckpt-0000NN; after the third one
  ckpt-000025 is deleted (keep the newest 2).

What a syscall trace sees (strace -f, DATA files only; one process, one thread)
------------------------------------------------------------------------------
  Resume (before the first batch):
    pretrained/latest:  openat, lseek(0,SEEK_CUR) x2, read(12)=11, read()=0, close
    metadata.json:      openat, lseek x2, read(865)=864, read()=0, close
    per shard_k.pt (torch.load(path, mmap=True, weights_only=True)):
      openat(fd A); the zip reader probes with lseek(SEEK_CUR/SEEK_END/SEEK_SET)
      and reads: 4096 @0, 4096 @0, 4096 @size-4096, then the end-of-central-
      directory records (22, 42, 98 bytes) and the central directory / local
      headers (621, 787, 877 bytes at their offsets); a second
      openat(fd B), mmap(NULL, 3715301, PROT_READ|PROT_WRITE, MAP_PRIVATE,
      fd B, 0), close(fd B); then 3 more lseek + read(4096) on fd A; close(A).
      Per shard: 2 openat, 18 lseek, 12 read (27,023 bytes), 1 mmap of the
      whole file.  The 3.7 MB of tensor data arrives through page faults on
      the private mapping, not through read().
    labels.txt:  openat, lseek x2, read(3257)=3256, read()=0, close.
  Per sample (np.fromfile, which reads through a FILE* on a duplicated fd):
      openat(scan) = A ; lseek(A,0,SEEK_CUR) ; fcntl(A, F_DUPFD_CLOEXEC) = B ;
      fcntl(B, F_GETFL) ; lseek(B,0,SEEK_CUR) ; lseek(A,0,SEEK_CUR) ;
      lseek(B,0,SEEK_SET) x2 ; lseek(B, size & ~4095, SEEK_SET) ;
      read(B, size % 4096) (glibc finding the end) ; lseek(B, 0, SEEK_SET) ;
      read(B, size & ~4095) (one big direct read) ;
      read(B, 4096) = size % 4096 (the tail again) ; close(B) ;
      lseek(A, 0, SEEK_SET) ; lseek(A, size, SEEK_SET) ; close(A).
    -> 1 openat, 9 lseek, 3 read, 2 close per scan; bytes read = size +
      size % 4096 (the tail is read twice).  The reads are on the fcntl-dup'ed
      fd, not on the fd returned by openat: a tracer that ignores fcntl
      F_DUPFD sees reads on an unknown descriptor.  8 scans per step in
      shuffled order; each epoch reads every scan once.
  Per checkpoint (3 per run), for each of 4 shards:
      openat(run/ckpt-N.tmp/shard_k.pt, O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC) ;
      lseek(0,SEEK_CUR) ; write(832) zip header + pickle ; write(1,856,744)
      flat_param ; write(88) zip record header ; write(1,856,744) momentum ;
      write(893) central directory ; fsync ; close.
    then metadata.json (openat, lseek x2, write(865), fsync, close),
    rename(ckpt-N.tmp, ckpt-N), latest.tmp (openat, lseek x2, write(11),
    close) and rename(latest.tmp, latest).  22 writes, 14,862,080 bytes per
    checkpoint; 66 writes, 44,586,240 bytes, 15 fsync per run.
  Directory housekeeping: shutil.rmtree opens each directory it removes,
  dups the fd (fcntl F_DUPFD_CLOEXEC), does one lseek(dup, 0, SEEK_SET) and
  unlinkat()s the entries: once for ckpt-000025 during the run, and at
  start-up for run/, ckpt-000050, ckpt-000074 if a previous run left them
  (so the very first run after --make has 3 fewer directory opens/lseeks;
  regular-file I/O is identical from run to run).
  Run totals on regular DATA files: 1,830 read (138,500,255 bytes), 5,430
  lseek, 4 mmap (14,861,204 bytes mapped), 66 write (44,586,240 bytes),
  15 fsync, 621 openat of regular files (296 x 2 epochs of scans + latest,
  metadata.json, labels.txt + 8 for the 4 shards (2 each) + 3 x 6
  checkpoint files).
"""
import json
import os
import shutil
import sys
import time

import numpy as np

NAME = "lidar_ckpt_resume"
SEED = 14005
N_SCANS = 296
MIN_P, MAX_P = 4096, 24576
SUB = 4096
BATCH = 8
EPOCHS = 2
STEP_SLEEP = 0.030
CKPT_EVERY = 25
KEEP = 2
N_SHARDS = 4
SHARD_FILE_BYTES = 3715301  # torch zip size of one shard file (measured)
LAYERS = [("enc.fc1.weight", (64, 4)), ("enc.fc1.bias", (64,)),
          ("enc.fc2.weight", (128, 64)), ("enc.fc2.bias", (128,)),
          ("enc.fc3.weight", (1024, 128)), ("enc.fc3.bias", (1024,)),
          ("head.proj.weight", (1024, 1024)), ("head.proj.bias", (1024,)),
          ("head.fc1.weight", (512, 1024)), ("head.fc1.bias", (512,)),
          ("head.fc2.weight", (256, 512)), ("head.fc2.bias", (256,)),
          ("head.out.weight", (40, 256)), ("head.out.bias", (40,))]


def point_counts():
    rng = np.random.default_rng(SEED)
    n = rng.integers(MIN_P, MAX_P, size=N_SCANS)
    n[n % 256 == 0] += 1
    labels = rng.integers(0, 40, size=N_SCANS)
    return n, labels


def flat_layout():
    offs, o = {}, 0
    for name, shape in LAYERS:
        offs[name] = (o, list(shape))
        o += int(np.prod(shape))
    per = -(-o // N_SHARDS)
    return offs, o, per


def save_checkpoint(ckdir, name, flat, mom, step):
    import torch
    offs, F, per = flat_layout()
    os.makedirs(ckdir, exist_ok=True)
    tmp = os.path.join(ckdir, name + ".tmp")
    os.makedirs(tmp)
    for k in range(N_SHARDS):
        state = {"flat_param": flat[k * per:(k + 1) * per].clone(),
                 "momentum": mom[k * per:(k + 1) * per].clone(), "shard": k}
        with open(os.path.join(tmp, f"shard_{k}.pt"), "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
    meta = {"step": step, "flat_numel": F, "shard_numel": per, "num_shards": N_SHARDS,
            "params": {n: {"offset": o, "shape": s} for n, (o, s) in offs.items()}}
    with open(os.path.join(tmp, "metadata.json"), "w") as f:
        json.dump(meta, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(ckdir, name))
    with open(os.path.join(ckdir, "latest.tmp"), "w") as f:
        f.write(name)
    os.replace(os.path.join(ckdir, "latest.tmp"), os.path.join(ckdir, "latest"))


def make(data):
    import torch
    n, labels = point_counts()
    vdir = os.path.join(data, "velodyne")
    os.makedirs(vdir, exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    for i in range(N_SCANS):
        pts = np.empty((int(n[i]), 4), np.float32)
        pts[:, :3] = rng.normal(0, 20, size=(int(n[i]), 3))
        pts[:, 3] = rng.random(int(n[i]))
        pts.tofile(os.path.join(vdir, f"{i:06d}.bin"))
    with open(os.path.join(data, "labels.txt"), "w") as f:
        for i in range(N_SCANS):
            f.write(f"{i:06d} {int(labels[i]):3d}\n")
    _, F, per = flat_layout()
    g = torch.Generator().manual_seed(SEED)
    flat = torch.zeros(per * N_SHARDS)
    flat[:F] = torch.randn(F, generator=g) * 0.02
    pre = os.path.join(data, "pretrained")
    if os.path.exists(pre):
        shutil.rmtree(pre)
    save_checkpoint(pre, "ckpt-000000", flat, torch.zeros_like(flat), 0)
    print(f"wrote {N_SCANS} scans and pretrained checkpoint to {data}")


def run(data):
    import torch
    from torch.utils.data import DataLoader, Dataset

    run_dir = os.path.join(data, "run")
    if os.path.exists(run_dir):
        shutil.rmtree(run_dir)

    # ---- resume -------------------------------------------------------
    pre = os.path.join(data, "pretrained")
    with open(os.path.join(pre, "latest")) as f:
        name = f.read().strip()
    with open(os.path.join(pre, name, "metadata.json")) as f:
        meta = json.load(f)
    per = meta["shard_numel"]
    flat = torch.empty(per * meta["num_shards"])
    mom = torch.empty_like(flat)
    for k in range(meta["num_shards"]):
        sd = torch.load(os.path.join(pre, name, f"shard_{k}.pt"), map_location="cpu",
                        mmap=True, weights_only=True)
        flat[k * per:(k + 1) * per].copy_(sd["flat_param"])
        mom[k * per:(k + 1) * per].copy_(sd["momentum"])
        del sd
    start_step = meta["step"]

    class Velodyne(Dataset):
        def __init__(self, root):
            self.root = root
            with open(os.path.join(root, "labels.txt")) as f:
                rows = [ln.split() for ln in f.read().splitlines()]
            self.ids = [r[0] for r in rows]
            self.labels = [int(r[1]) for r in rows]
            self.epoch = 0

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, i):
            pts = np.fromfile(os.path.join(self.root, "velodyne", self.ids[i] + ".bin"),
                              dtype=np.float32).reshape(-1, 4)
            rng = np.random.default_rng([SEED, self.epoch, i])
            sel = rng.choice(len(pts), SUB, replace=False)
            return torch.from_numpy(pts[sel]), self.labels[i]

    ds = Velodyne(data)
    gen = torch.Generator().manual_seed(SEED)
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, generator=gen, num_workers=0,
                        drop_last=True)
    t0 = time.time()
    step = start_step
    saved = []
    total_steps = EPOCHS * (N_SCANS // BATCH)
    for epoch in range(EPOCHS):
        ds.epoch = epoch
        for pts, y in loader:
            feat = pts.mean(dim=(0, 1)).sum()
            mom.mul_(0.9).add_(float(feat) * 1e-4)
            flat.sub_(mom, alpha=1e-3)
            time.sleep(STEP_SLEEP)
            step += 1
            if step % CKPT_EVERY == 0 or step == start_step + total_steps:
                name = f"ckpt-{step:06d}"
                save_checkpoint(run_dir, name, flat, mom, step)
                saved.append(name)
                while len(saved) > KEEP:
                    shutil.rmtree(os.path.join(run_dir, saved.pop(0)))
                print(f"step {step}: saved {name} t={time.time() - t0:.2f}s", flush=True)
        print(f"epoch {epoch}: step={step} t={time.time() - t0:.2f}s", flush=True)
    print(f"finished {step - start_step} steps in {time.time() - t0:.2f}s")


def truth():
    n, _ = point_counts()
    sizes = n.astype(np.int64) * 16
    _, F, per = flat_layout()
    spe = N_SCANS // BATCH
    total = spe * EPOCHS
    ck_steps = [s for s in range(1, total + 1) if s % CKPT_EVERY == 0 or s == total]
    fromfile_bytes_epoch = int(sizes.sum() + (sizes % 4096).sum())
    labels_bytes = N_SCANS * 11
    resume_bytes = 11 + 864 + N_SHARDS * 27023
    ck_bytes = N_SHARDS * (832 + 2 * per * 4 + 88 + 893) + 865 + 11
    return {
        "program": NAME,
        "format": "KITTI velodyne float32 .bin scans + torch zip shard checkpoints",
        "files": {"velodyne/NNNNNN.bin": {"count": N_SCANS, "bytes": int(sizes.sum())},
                  "labels.txt": labels_bytes,
                  "pretrained/ckpt-000000/shard_K.pt": {"count": N_SHARDS,
                                                        "bytes_each": SHARD_FILE_BYTES},
                  "pretrained/ckpt-000000/metadata.json": 864,
                  "pretrained/latest": len("ckpt-000000")},
        "num_files": N_SCANS + 1 + N_SHARDS + 2,
        "samples_per_file": 1,
        "num_samples": N_SCANS,
        "sample_size_bytes": {"what": "one scan file (N x 4 float32)", "mean": float(sizes.mean()),
                              "min": int(sizes.min()), "max": int(sizes.max()),
                              "total_bytes": int(sizes.sum())},
        "dataset_bytes_scans": int(sizes.sum()),
        "batch_size": BATCH,
        "readers": {"kind": "main process", "api": "DataLoader(num_workers=0)", "count": 1},
        "prefetch": None,
        "sampler": "RandomSampler (torch.Generator seed 14005), drop_last",
        "epochs": EPOCHS,
        "steps_per_epoch": spe,
        "total_steps": total,
        "compute_time_per_step_s": STEP_SLEEP,
        "checkpoints": {"resume_from": "pretrained/ckpt-000000 (torch.load mmap=True, 4 shards)",
                        "save_steps": ck_steps, "shards_per_checkpoint": N_SHARDS,
                        "tensor_bytes_per_shard": 2 * per * 4,
                        "tensor_bytes_per_checkpoint": 2 * per * 4 * N_SHARDS,
                        "flat_params": F, "keep_last": KEEP,
                        "publish": "fsync each shard, rename(tmp_dir, dir), latest.tmp -> latest"},
        "io_api": "np.fromfile (stdio on a dup()ed fd); torch.load(mmap=True); torch.save(fileobj)",
        "expected_bytes_read_per_epoch": fromfile_bytes_epoch,
        "expected_bytes_read_resume": resume_bytes,
        "expected_bytes_read_total": EPOCHS * fromfile_bytes_epoch + labels_bytes + resume_bytes,
        "expected_bytes_read_note": "resume = latest (11) + metadata.json (864) + 4 x 27,023 "
                                    "zip-directory bytes (measured, torch 2.x); shard tensor "
                                    "data is mmapped, not read",
        "expected_mmaps": {"count": N_SHARDS, "bytes": N_SHARDS * SHARD_FILE_BYTES},
        "expected_read_calls": {"per_epoch": {"read": 3 * N_SCANS, "lseek": 9 * N_SCANS,
                                              "openat": N_SCANS, "fcntl_dupfd": N_SCANS},
                                "total": {"read": 3 * N_SCANS * EPOCHS + 2 + 2 + 2 + 12 * N_SHARDS,
                                          "lseek": 9 * N_SCANS * EPOCHS + 6 + 18 * N_SHARDS
                                          + (N_SHARDS + 4) * len(ck_steps)},
                                "note": "regular files only; lseek total includes the SEEK_CUR "
                                        "probes of the checkpoint writers.  shutil.rmtree adds "
                                        "one lseek per directory it removes (ckpt-000025 during "
                                        "the run; at start-up run/ and its 2 checkpoint dirs "
                                        "when a previous run exists)"},
        "expected_bytes_written": ck_bytes * len(ck_steps),
        "expected_bytes_written_per_checkpoint": ck_bytes,
        "expected_write_calls": {"per_shard": 5, "per_checkpoint": 5 * N_SHARDS + 2,
                                 "total": (5 * N_SHARDS + 2) * len(ck_steps)},
        "expected_fsync_calls": (N_SHARDS + 1) * len(ck_steps),
        "deterministic_order": True,
        "needs": ["torch"],
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
