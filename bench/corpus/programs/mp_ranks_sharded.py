"""Two "ranks" (spawned processes) each reading its own half of raw files, in step by a Barrier.

100 .bin files of random bytes, sizes uniform in [24 KiB, 192 KiB]. The main process starts
2 rank processes with multiprocessing's "spawn" context (each a fresh Python interpreter) and
waits for them; it reads no data itself. Rank r takes the files r::2 of the sorted list (50
files each, disjoint), and per epoch shuffles its own shard with its own random.Random
(seeded SEED + r, one generator for the whole run), then reads it in steps of 4 files: each
file with plain open(path, "rb").read(), then 10 ms of sleep as compute, then
Barrier.wait() with the other rank (one shared multiprocessing.Barrier(2); there is also one
wait before the first step, like a distributed init). 50 // 4 = 12 steps per epoch, so the
last 2 files of each rank's shuffle are skipped (drop_last); which 2 changes every epoch.

What a syscall trace sees: three child processes, each a vfork + execve of the same python
(-B -c "from multiprocessing..."): multiprocessing's resource tracker (started because the
Barrier's semaphores are named resources; it reads no data) and the 2 ranks, each with its
own pid, the interpreter start-up and imports, then all its data reads on its main thread.
Per data file: openat, fstat, ioctl(TCGETS) (fails: not a tty), lseek(0, SEEK_CUR) twice,
fstat again, one read() of the whole file (size + 1 bytes asked), one empty 1-byte read,
close. The two ranks read at about the same moments (the barrier lines up their steps) but
never the same file. The Barrier itself is semaphores in shared memory, seen as futex calls
only. The main process reads no data. No writes.

Usage: mp_ranks_sharded.py DATA [--make | --truth]
Fixed by the program: 100 files, 1 sample per file, 2 ranks x batch 4 (global batch 8), 2
epochs of 12 steps (each rank), 10 ms compute per step, a barrier every step, no read ahead,
no checkpoint, no eval. stdlib only.
"""
import json
import multiprocessing as mp
import os
import random
import sys
import time

FILES, RANKS, BATCH, EPOCHS, COMPUTE_S = 100, 2, 4, 2, 0.010
LO, HI = 24 << 10, 192 << 10
SEED = 5150


def file_sizes():
    rng = random.Random(SEED)
    return [rng.randint(LO, HI) for _ in range(FILES)]


def file_names(data):
    return sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".bin")) \
        if os.path.isdir(data) else []


def truth(data):
    s = file_sizes()
    per_rank = len(range(0, FILES, RANKS))
    steps = per_rank // BATCH
    return {
        "program": "mp_ranks_sharded", "needs": [], "format": "raw (.bin)",
        "io_library": "open(path, 'rb').read() in 2 spawned rank processes",
        "data_layout": "DATA/*.bin", "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "uniform", "range": [LO, HI], "mean": sum(s) / len(s),
                        "min": min(s), "max": max(s), "total": sum(s)},
        "file_size": "as sample_size", "batch_size": BATCH,
        "global_batch_size": BATCH * RANKS,
        "readers": {"kind": "process", "count": RANKS,
                    "framework": "multiprocessing (spawn), one process per rank",
                    "sharding": "rank r reads files r::2 of the sorted list",
                    "sync": "multiprocessing.Barrier(2) after every step"},
        "prefetch": 0, "epochs": EPOCHS, "steps_per_epoch": steps,
        "total_steps": EPOCHS * steps, "compute_s_per_step": COMPUTE_S,
        "files_read_per_epoch": RANKS * steps * BATCH,
        "shuffle": "each rank's shard, per epoch, own seed per rank (drop_last: 2 files per "
                   "rank skipped each epoch)",
        "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "whole file in one read() per sample, both ranks reading at the same "
                        "time on disjoint files",
    }


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = random.Random(SEED + 1)
    for i, n in enumerate(file_sizes()):
        with open(os.path.join(data, f"part_{i:04d}.bin"), "wb") as f:
            f.write(rng.randbytes(n))


def rank_main(rank, names, barrier):
    shard = names[rank::RANKS]
    rng = random.Random(SEED + rank)
    barrier.wait()
    for epoch in range(EPOCHS):
        order = shard[:]
        rng.shuffle(order)
        for s in range(len(order) // BATCH):
            batch = []
            for path in order[s * BATCH:(s + 1) * BATCH]:
                with open(path, "rb") as f:
                    batch.append(f.read())
            assert len(batch) == BATCH and all(batch)
            time.sleep(COMPUTE_S)
            barrier.wait()


def train(data):
    names = file_names(data)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(RANKS)
    procs = [ctx.Process(target=rank_main, args=(r, names, barrier)) for r in range(RANKS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
