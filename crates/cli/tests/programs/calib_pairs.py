"""Lidar-style frames, each with a small calibration file of its own read before it.

Usage: calib_pairs.py DATA_DIR [--make]
Fixed by the program: DATA_DIR/frames holds 48 .bin frames of 24 KiB, DATA_DIR/calib one
.txt of 700 bytes per frame, named as the frame. One thread; per sample it reads the frame's
calibration whole, then the frame whole; batch 4, 2 epochs shuffled, 15 ms of compute a batch.
"""
import os
import random
import sys
import time

FRAMES, FRAME_BYTES, CALIB_BYTES, BATCH, EPOCHS, COMPUTE_S = 48, 24 * 1024, 700, 4, 2, 0.015

data = sys.argv[1]
frames, calib = os.path.join(data, "frames"), os.path.join(data, "calib")
if "--make" in sys.argv:
    os.makedirs(frames, exist_ok=True)
    os.makedirs(calib, exist_ok=True)
    rng = random.Random(3)
    for i in range(FRAMES):
        with open(os.path.join(frames, f"{i:06d}.bin"), "wb") as f:
            f.write(rng.randbytes(FRAME_BYTES))
        with open(os.path.join(calib, f"{i:06d}.txt"), "w") as f:
            f.write(("P0: " + " ".join(f"{rng.random():.6f}" for _ in range(100)))[:CALIB_BYTES - 1] + "\n")
    sys.exit(0)

names = sorted(n[:-4] for n in os.listdir(frames) if n.endswith(".bin"))
rng = random.Random(11)
for epoch in range(EPOCHS):
    order = names[:]
    rng.shuffle(order)
    for step in range(len(order) // BATCH):
        for name in order[step * BATCH:(step + 1) * BATCH]:
            with open(os.path.join(calib, name + ".txt")) as f:
                assert len(f.read()) == CALIB_BYTES
            with open(os.path.join(frames, name + ".bin"), "rb") as f:
                assert len(f.read()) == FRAME_BYTES
        time.sleep(COMPUTE_S)
