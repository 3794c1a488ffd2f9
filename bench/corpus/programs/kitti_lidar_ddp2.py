"""LiDAR 3D-detection training in the OpenPCDet style on a KITTI-layout data set, run as
2 data-parallel ranks: the launcher forks two rank processes (standing in for
torchrun/DDP), each with torch DistributedSampler(num_replicas=2, rank=r) and its own
DataLoader with 1 worker; per frame a worker parses the frame's calib .txt and loads its
velodyne point cloud with np.fromfile; ranks step in lockstep (a multiprocessing.Barrier per
step stands in for the gradient all-reduce) and rank 0 saves a checkpoint every epoch.

Data set (DATA/, about 61 MB):
  DATA/ImageSets/train.txt              480 frame ids 000000..000479 (3360 bytes);
  DATA/kitti_infos_train.pkl            OpenPCDet-style info list: per frame lidar_idx,
                                        num_points and annotations (names, 1-11 gt boxes
                                        as float32 (k, 7)); pickle, 256,976 bytes;
  DATA/training/velodyne/NNNNNN.bin     480 files, float32 (n, 4) x, y, z, intensity, n
                                        uniform 4000..12000 (seed 666): 64-192 KB, mean
                                        125 KB, 60.0 MB in all;
  DATA/training/calib/NNNNNN.txt        480 KITTI calib files (P0-P3, R0_rect,
                                        Tr_velo_to_cam, Tr_imu_to_velo), ~1.6 KB each.
  Training writes DATA/output/ckpt/checkpoint_epoch_{1,2,3}.pth (8.0 MB each).

Training: the launcher (main process) forks 2 rank processes and waits. Each rank builds
the dataset (reads ImageSets/train.txt and unpickles kitti_infos_train.pkl, once per rank),
then per epoch: sampler.set_epoch(e) (one torch permutation per epoch, seed 666 + e; rank r
takes perm[r::2], 240 frames), DataLoader(batch_size=4, sampler, num_workers=1,
prefetch_factor=4, non-persistent worker forked from the rank, custom collate that
concatenates the point clouds with a batch-index column and pads the boxes). Per frame the
worker reads calib, reads the velodyne file, random-flips and range-crops the points. The
rank sleeps 25 ms per step then waits on the barrier. 3 epochs x 60 steps per rank (180
steps, 8 frames per global step). At the end of each epoch rank 0 torch.save()s
{"epoch", model_state (4 MB tensor), optimizer_state (4 MB tensor)} to
checkpoint_epoch_{e+1}.pth while rank 1 waits on the barrier. No eval.

What a syscall trace sees (strace -f -e trace=openat,read,pread64,lseek,write): 5 kinds of
processes: the launcher (no data I/O), rank 0 and rank 1 (train.txt: read(8192) = 3360 +
EOF read; kitti_infos_train.pkl: 4 x read(4096), 3 x read(61440), read(53248),
read(4096) = 3024, i.e. the whole 257 KB once per rank), and one DataLoader worker per rank
per epoch (6 worker PIDs in all, two alive at a time, one per rank), which do ALL frame
I/O. Per frame, in this order: calib/NNNNNN.txt: openat(O_RDONLY|O_CLOEXEC),
lseek(0, SEEK_CUR), read(8192) = ~1620, read(8192) = 0, close; then
velodyne/NNNNNN.bin: openat(O_RDONLY|O_CLOEXEC), and np.fromfile dup()s the fd
(fcntl(F_DUPFD_CLOEXEC), not in the traced set, so the reads appear on an fd number that no
openat returned) and reads through stdio on the duplicate: lseek(dup, size & ~4095,
SEEK_SET), read(dup, tail) (the last partial 4 KiB block, e.g. 1856 bytes), lseek(dup, 0,
SEEK_SET), ONE read(dup, size & ~4095) (e.g. 176128 = the whole file but the tail) and
read(dup, 4096) = tail (the tail is read twice), close(dup), close(fd). ~2 files and 5
reads per frame; each worker reads its rank's 240 frames per epoch in random (shuffled id)
order, up to 4 batches (16 frames) ahead of its rank; the two ranks' workers read
concurrently, disjoint halves of the data set. Per epoch all 480 velodyne files (60.0 MB
+ 0.97 MB of tails read twice) and 480 calib files (0.78 MB). Checkpoints (rank 0, end of
each epoch): openat(checkpoint_epoch_N.pth, O_WRONLY|O_CREAT|O_TRUNC), then torch's zip
writer issues writev() (NOT write: writev(4000704) and writev(4000064)) plus one
write(821), close; 24 MB written in all.

Usage: kitti_lidar_ddp2.py DATA [--make | --truth]
Needs torch. Writes DATA/output/ckpt/.
"""
import json
import os
import pickle
import sys
import time

import numpy as np

N, MIN_PTS, MAX_PTS = 480, 4000, 12000
WORLD, BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S = 2, 4, 1, 4, 3, 0.025
N_PARAMS = 1_000_000
SEED = 666
CLASSES = ["Car", "Pedestrian", "Cyclist"]


def ids():
    return ["%06d" % i for i in range(N)]


def point_counts():
    return np.random.default_rng(SEED).integers(MIN_PTS, MAX_PTS + 1, N)


def rank_indices(rank, epoch):
    # what torch DistributedSampler(shuffle=True, seed=SEED, drop_last=False) yields
    import torch
    g = torch.Generator()
    g.manual_seed(SEED + epoch)
    perm = torch.randperm(N, generator=g).tolist()
    return perm[rank:N:WORLD]


def truth(data):
    pts = point_counts()
    nb = pts * 16
    per_rank = N // WORLD
    steps = (per_rank + BATCH - 1) // BATCH
    calib = os.path.join(data, "training", "calib", "000000.txt")
    return {
        "program": "kitti_lidar_ddp2", "needs": ["torch"],
        "format": "KITTI object: velodyne float32 x,y,z,intensity .bin + calib .txt per "
                  "frame, OpenPCDet-style infos pickle",
        "io_library": "np.fromfile (velodyne), text open/readlines (calib), pickle.load (infos)",
        "data_layout": "DATA/ImageSets/train.txt, DATA/kitti_infos_train.pkl, "
                       "DATA/training/velodyne/NNNNNN.bin, DATA/training/calib/NNNNNN.txt",
        "num_files": 2 * N, "samples_per_file": 1,
        "sample_size": {"dist": "uniform points 4000..12000 x 16 bytes",
                        "min_bytes": int(nb.min()), "max_bytes": int(nb.max()),
                        "mean_bytes": int(nb.mean()), "total_bytes": int(nb.sum()),
                        "calib_bytes": os.path.getsize(calib) if os.path.exists(calib) else None},
        "batch_size": {"per_rank": BATCH, "global": BATCH * WORLD},
        "readers": {"kind": "process", "count": WORLD * WORKERS,
                    "framework": "2 rank processes (multiprocessing fork), each with a torch "
                                 "DataLoader(num_workers=1), workers re-created every epoch"},
        "prefetch": {"kind": "DataLoader prefetch_factor", "per_worker_batches": PREFETCH},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "steps_note": "per rank; both ranks step in lockstep (barrier per step)",
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "DistributedSampler(num_replicas=2, shuffle=True, seed=666), set_epoch(e): "
                   "one permutation per epoch (torch seed 666 + epoch), rank r takes perm[r::2]",
        "eval": None,
        "checkpoint": {"when": "end of every epoch, rank 0 only", "writer": "torch.save",
                       "path": "DATA/output/ckpt/checkpoint_epoch_{1,2,3}.pth",
                       "bytes_approx": N_PARAMS * 4 * 2},
        "side_files": [{"path": "ImageSets/train.txt", "reads": "once per rank"},
                       {"path": "kitti_infos_train.pkl", "reads": "once per rank"}],
        "read_pattern": "per frame, in a DataLoader worker: calib .txt opened, read(8192) = "
                        "~1.6 KB + EOF read, closed; velodyne .bin opened, fd dup'ed by "
                        "np.fromfile, lseek to the last 4 KiB boundary + read of the tail, "
                        "lseek(0), one read of the file rounded down to 4 KiB, read(4096) = "
                        "tail again, close; frames in random order, each frame read by exactly "
                        "one rank per epoch",
        "checkpoint_syscalls": "writev(~4.0 MB) x 2 + write(821) per torch.save",
        "bytes_per_epoch": int(nb.sum()),
    }


def make(data):
    rng = np.random.default_rng(SEED + 1)
    for sub in ("ImageSets", "training/velodyne", "training/calib"):
        os.makedirs(os.path.join(data, sub), exist_ok=True)
    infos = []
    for sid, n in zip(ids(), point_counts()):
        n = int(n)
        r = rng.uniform(2, 70, n)
        th = rng.uniform(-np.pi / 4, np.pi / 4, n)
        pts = np.stack([r * np.cos(th), r * np.sin(th), rng.uniform(-2, 1, n),
                        rng.uniform(0, 1, n)], axis=1).astype(np.float32)
        pts.tofile(os.path.join(data, "training", "velodyne", sid + ".bin"))
        p = rng.normal(0, 1, (3, 4)) + np.array([[721.5, 0, 609.5, 44.8], [0, 721.5, 172.8, 0.2],
                                                 [0, 0, 1, 0.003]])
        with open(os.path.join(data, "training", "calib", sid + ".txt"), "w") as f:
            for k in range(4):
                f.write("P%d: %s\n" % (k, " ".join("%.12e" % v for v in p.ravel())))
            f.write("R0_rect: %s\n" % " ".join("%.12e" % v for v in np.eye(3).ravel()))
            f.write("Tr_velo_to_cam: %s\n" % " ".join("%.12e" % v for v in
                                                      rng.normal(0, 0.01, 12)))
            f.write("Tr_imu_to_velo: %s\n" % " ".join("%.12e" % v for v in
                                                      rng.normal(0, 0.01, 12)))
        k = int(rng.integers(1, 12))
        infos.append({"point_cloud": {"num_features": 4, "lidar_idx": sid, "num_points": n},
                      "annos": {"name": np.array([CLASSES[c] for c in rng.integers(3, size=k)]),
                                "gt_boxes_lidar": rng.normal(0, 5, (k, 7)).astype(np.float32)}})
    with open(os.path.join(data, "ImageSets", "train.txt"), "w") as f:
        f.write("\n".join(ids()) + "\n")
    with open(os.path.join(data, "kitti_infos_train.pkl"), "wb") as f:
        pickle.dump(infos, f)


class KittiLidar:
    def __init__(self, data):
        self.root = os.path.join(data, "training")
        with open(os.path.join(data, "ImageSets", "train.txt")) as f:
            self.ids = [x.strip() for x in f if x.strip()]
        with open(os.path.join(data, "kitti_infos_train.pkl"), "rb") as f:
            self.infos = pickle.load(f)
        self.epoch = 0

    def __len__(self):
        return len(self.infos)

    def get_calib(self, sid):
        out = {}
        with open(os.path.join(self.root, "calib", sid + ".txt")) as f:
            for line in f.readlines():
                key, vals = line.split(":", 1)
                out[key] = np.array(vals.split(), dtype=np.float32)
        return out

    def __getitem__(self, i):
        info = self.infos[i]
        sid = info["point_cloud"]["lidar_idx"]
        calib = self.get_calib(sid)
        pts = np.fromfile(os.path.join(self.root, "velodyne", sid + ".bin"),
                          dtype=np.float32).reshape(-1, 4)
        assert len(pts) == info["point_cloud"]["num_points"] and "Tr_velo_to_cam" in calib
        boxes = info["annos"]["gt_boxes_lidar"].copy()
        rng = np.random.default_rng(SEED * 1000 + self.epoch * N + i)
        if rng.random() < 0.5:
            pts[:, 1] *= -1
            boxes[:, 1] *= -1
        keep = (pts[:, 0] > 0) & (pts[:, 0] < 70.4) & (np.abs(pts[:, 1]) < 40)
        return {"points": pts[keep], "gt_boxes": boxes}


def collate(items):
    import torch
    pts = np.concatenate([np.pad(d["points"], ((0, 0), (1, 0)), constant_values=k)
                          for k, d in enumerate(items)])
    m = max(len(d["gt_boxes"]) for d in items)
    boxes = np.zeros((len(items), m, 7), dtype=np.float32)
    for k, d in enumerate(items):
        boxes[k, :len(d["gt_boxes"])] = d["gt_boxes"]
    return torch.from_numpy(pts), torch.from_numpy(boxes)


def run_rank(rank, data, barrier, results):
    import torch
    from torch.utils.data import DataLoader, DistributedSampler
    torch.set_num_threads(1)
    ds = KittiLidar(data)
    sampler = DistributedSampler(ds, num_replicas=WORLD, rank=rank, shuffle=True, seed=SEED)
    params = torch.zeros(N_PARAMS)
    ckpt_dir = os.path.join(data, "output", "ckpt")
    steps = 0
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        ds.epoch = epoch
        assert list(iter(sampler)) == rank_indices(rank, epoch)
        loader = DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=WORKERS,
                            prefetch_factor=PREFETCH, collate_fn=collate)
        for pts, boxes in loader:
            assert pts.shape[1] == 5 and boxes.shape[2] == 7
            time.sleep(COMPUTE_S)
            barrier.wait()  # stands in for the gradient all-reduce
            steps += 1
        if rank == 0:
            params += 1.0
            torch.save({"epoch": epoch + 1, "model_state": {"weight": params},
                        "optimizer_state": {"exp_avg": params.clone()}},
                       os.path.join(ckpt_dir, "checkpoint_epoch_%d.pth" % (epoch + 1)))
        barrier.wait()
    results.put((rank, steps))


def train(data):
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    os.makedirs(os.path.join(data, "output", "ckpt"), exist_ok=True)
    barrier, results = ctx.Barrier(WORLD), ctx.Queue()
    t0 = time.time()
    procs = [ctx.Process(target=run_rank, args=(r, data, barrier, results)) for r in range(WORLD)]
    for p in procs:
        p.start()
    done = dict(results.get() for _ in procs)
    for p in procs:
        p.join()
        assert p.exitcode == 0
    print("kitti_lidar_ddp2: %d ranks x %d steps, %d epochs, %.1f s"
          % (WORLD, done[0], EPOCHS, time.time() - t0))


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
