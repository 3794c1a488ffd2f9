"""An image-folder data set read class by class, as a file list in class order is read by a
DALI-like file reader that shuffles only inside a small buffer.

DATA/train/c0 .. c3/s_NN.npy: 4 class folders of 10 npy files of 16,384 to 49,152 bytes of
data each; DATA/val/v_N.npy: 4 more, the evaluation split. Each epoch reads the list in
class order (c0's files, then c1's, ...), one file per np.load, in batches of 4 with 10 ms
of compute after each; after each epoch the four val files are read and 5 ms spent on each.
2 epochs of 10 steps.

Usage: class_folders_in_turn.py DATA [--make]
"""
import os
import random
import sys
import time

import numpy as np

CLASSES, PER_CLASS, VAL, BATCH, EPOCHS = 4, 10, 4, 4, 2
COMPUTE_S, VAL_S = 0.010, 0.005


def make(data):
    rng = random.Random(23)
    for c in range(CLASSES):
        os.makedirs(os.path.join(data, "train", "c%d" % c), exist_ok=True)
        for i in range(PER_CLASS):
            n = rng.randrange(16384, 49152)
            np.save(os.path.join(data, "train", "c%d" % c, "s_%02d.npy" % i),
                    np.frombuffer(os.urandom(n), dtype=np.uint8))
    os.makedirs(os.path.join(data, "val"), exist_ok=True)
    for i in range(VAL):
        np.save(os.path.join(data, "val", "v_%d.npy" % i),
                np.frombuffer(os.urandom(32768), dtype=np.uint8))


def train(data):
    listing = [os.path.join(data, "train", "c%d" % c, "s_%02d.npy" % i)
               for c in range(CLASSES) for i in range(PER_CLASS)]
    val = [os.path.join(data, "val", "v_%d.npy" % i) for i in range(VAL)]
    for _ in range(EPOCHS):
        for step in range(0, len(listing), BATCH):
            batch = [np.load(p) for p in listing[step:step + BATCH]]
            assert len(batch) == BATCH
            time.sleep(COMPUTE_S)
        for p in val:
            np.load(p)
            time.sleep(VAL_S)


if __name__ == "__main__":
    if "--make" in sys.argv:
        make(sys.argv[1])
    else:
        train(sys.argv[1])
