"""Random windows: each sample opens one of a few large files, reads one window of it at an
offset drawn at random (an audio or video loader's random crop), and closes it.

Usage: random_windows.py DATA_DIR [--make]
Fixed by the program: 12 raw files of 192 to 416 KiB (sizes drawn once, seeded), windows of
16 KiB read with one unbuffered read after a seek, 180 windows in batches of 6 (30 steps), one
thread, 8 ms of compute per batch.
"""
import os
import random
import sys
import time

FILES, WINDOW, BATCH, STEPS, COMPUTE_S = 12, 16 << 10, 6, 30, 0.008

data = sys.argv[1]
if "--make" in sys.argv:
    os.makedirs(data, exist_ok=True)
    sizes = random.Random(5)
    for i in range(FILES):
        with open(os.path.join(data, f"clip_{i:02d}.raw"), "wb") as f:
            f.write(os.urandom(sizes.randrange(192, 416) << 10))
    sys.exit(0)

clips = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".raw"))
sizes = [os.path.getsize(c) for c in clips]
rng = random.Random(17)
for step in range(STEPS):
    for _ in range(BATCH):
        k = rng.randrange(FILES)
        with open(clips[k], "rb", buffering=0) as f:
            f.seek(rng.randrange(0, sizes[k] - WINDOW))
            assert len(f.read(WINDOW)) == WINDOW
    time.sleep(COMPUTE_S)
