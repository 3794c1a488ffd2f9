"""Worker processes that read ahead for a training process, as PyTorch's DataLoader does.

DATA holds 64 npy files of 32 KiB (uint8). Two forked worker processes each take batch
numbers from their own multiprocessing.Queue, np.load the batch's 4 files and put the stacked
array on one shared result queue (pickled through its pipe). The training process keeps 2
batches in flight per worker (in the DataLoader's prefetch_factor sense), hands batch numbers
out in turn, takes the results, keeps batches that come early until their turn (batches reach
it out of order) and sleeps 15 ms per step. 2 epochs of 16 steps, a new shuffle each epoch.

Usage: worker_queue.py DATA [--make]
"""
import multiprocessing as mp
import os
import random
import sys
import time

import numpy as np

FILES, SAMPLE, BATCH, WORKERS, IN_FLIGHT, EPOCHS, COMPUTE_S = 64, 32 << 10, 4, 2, 2, 2, 0.015


def make(data):
    os.makedirs(data, exist_ok=True)
    for i in range(FILES):
        x = np.random.default_rng(i).integers(0, 255, SAMPLE, dtype=np.uint8)
        np.save(os.path.join(data, f"sample_{i:03d}.npy"), x)


def worker(names, tasks, results):
    while True:
        task = tasks.get()
        if task is None:
            return
        number, indices = task
        results.put((number, np.stack([np.load(names[i]) for i in indices])))


def train(data):
    names = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".npy"))
    ctx = mp.get_context("fork")
    tasks = [ctx.Queue() for _ in range(WORKERS)]
    results = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(names, q, results)) for q in tasks]
    for p in procs:
        p.start()
    rng = random.Random(7)
    for _ in range(EPOCHS):
        order = list(range(FILES))
        rng.shuffle(order)
        batches = [order[i:i + BATCH] for i in range(0, FILES, BATCH)]
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
            assert batch.shape == (BATCH, SAMPLE)
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
