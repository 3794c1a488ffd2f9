"""Objects downloaded by ranged requests in parallel, as an object store's client does.

DATA/objects/obj_00.bin .. obj_11.bin: 12 files of 300,000 to 1,200,000 bytes. Each step takes
2 objects and downloads each one by ranges of 262,144 bytes (the last one shorter) on a pool of
4 threads, every range a request of its own: open, one pread of the range, close (a stateless
GET). The step waits for both objects, joins their parts and sleeps 15 ms. 3 epochs of 6
steps, a new order each epoch.

Usage: ranged_gets.py DATA [--make]
"""
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor

FILES, RANGE, BATCH, EPOCHS, COMPUTE_S, THREADS = 12, 262144, 2, 3, 0.015, 4


def make(data):
    os.makedirs(os.path.join(data, "objects"), exist_ok=True)
    rng = random.Random(41)
    for i in range(FILES):
        with open(os.path.join(data, "objects", "obj_%02d.bin" % i), "wb") as f:
            f.write(os.urandom(rng.randrange(300_000, 1_200_000)))


def get(path, start, length):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, length, start)
    finally:
        os.close(fd)


def download(pool, path):
    size = os.stat(path).st_size
    parts = [pool.submit(get, path, start, min(RANGE, size - start))
             for start in range(0, size, RANGE)]
    return parts, size


def train(data):
    paths = sorted(os.path.join(data, "objects", n) for n in os.listdir(os.path.join(data, "objects")))
    rng = random.Random(5)
    with ThreadPoolExecutor(THREADS) as pool:
        for _ in range(EPOCHS):
            order = paths[:]
            rng.shuffle(order)
            for step in range(0, len(order), BATCH):
                for parts, size in [download(pool, p) for p in order[step:step + BATCH]]:
                    assert sum(len(part.result()) for part in parts) == size
                time.sleep(COMPUTE_S)


if __name__ == "__main__":
    if "--make" in sys.argv:
        make(sys.argv[1])
    else:
        train(sys.argv[1])
