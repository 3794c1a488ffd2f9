"""Random rows of one contiguous HDF5 dataset, read by worker processes that keep it open.

DATA/train.h5 holds "images", 384 rows of 16384 bytes (uint8, contiguous, h5py's default
layout), and "labels", 384 int64. The training process opens the file once to learn its
length (HDF5 metadata reads) and closes it. Two forked worker processes each open the file
and keep the "images" dataset open, take batch numbers from their own multiprocessing.Queue,
read the batch's 8 rows as images[i] and put the stacked array on one result queue, as
PyTorch's DataLoader with an h5py Dataset opened in worker_init_fn does. HDF5 reads a row
smaller than its 64 KiB sieve buffer as a window of 64 KiB from the row on (up to the
dataset's end) and serves the rows inside the window it read last without a read: a row
that falls among the 3 rows after the last one read (about 1 in 130 here, so the bytes read
vary little from run to run). The
training process keeps 2 batches in flight per worker, takes them in order and sleeps 12 ms
per step. 2 epochs of 48 steps, a new shuffle each epoch.

Usage: h5_rows_workers.py DATA [--make]
"""
import multiprocessing as mp
import os
import random
import sys
import time

import h5py
import numpy as np

ROWS, ROW, BATCH, WORKERS, IN_FLIGHT, EPOCHS, COMPUTE_S = 384, 16384, 8, 2, 2, 2, 0.012


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(11)
    with h5py.File(os.path.join(data, "train.h5"), "w") as f:
        f.create_dataset("images", data=rng.integers(0, 255, (ROWS, ROW), dtype=np.uint8))
        f.create_dataset("labels", data=rng.integers(0, 10, ROWS).astype(np.int64))


def worker(path, tasks, results):
    images = h5py.File(path, "r")["images"]
    while True:
        task = tasks.get()
        if task is None:
            return
        number, rows = task
        results.put((number, np.stack([images[i] for i in rows])))


def train(data):
    path = os.path.join(data, "train.h5")
    with h5py.File(path, "r") as f:
        rows = len(f["images"])
    ctx = mp.get_context("fork")
    tasks = [ctx.Queue() for _ in range(WORKERS)]
    results = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(path, q, results)) for q in tasks]
    for p in procs:
        p.start()
    rng = random.Random(5)
    for _ in range(EPOCHS):
        order = list(range(rows))
        rng.shuffle(order)
        batches = [order[i:i + BATCH] for i in range(0, rows, BATCH)]
        sent = 0

        def send():
            nonlocal sent
            if sent < len(batches):
                tasks[sent % WORKERS].put((sent, batches[sent]))
                sent += 1

        for _ in range(WORKERS * IN_FLIGHT):
            send()
        early = {}
        for step in range(len(batches)):
            while step not in early:
                number, batch = results.get()
                early[number] = batch
            batch = early.pop(step)
            assert batch.shape == (BATCH, ROW)
            send()
            time.sleep(COMPUTE_S)
    for q in tasks:
        q.put(None)
    for p in procs:
        p.join()


if __name__ == "__main__":
    if "--make" in sys.argv:
        make(sys.argv[1])
    else:
        train(sys.argv[1])
