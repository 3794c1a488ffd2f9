"""A chunked reader: fixed-size slices of a few large files in shuffled order, a metadata file
read every few steps, a sleep per batch as the compute and a checkpoint every 8 steps.

Usage: chunked_reader.py DATA_DIR [--make]
Fixed by the program: 4 files of 8 MiB, slices of 256 KiB (128 samples), batch 8, 2 epochs,
one thread, metadata.json (about 200 bytes) read every 4 steps, 20 ms of compute per batch, a
256 KiB checkpoint written into DATA_DIR_ckpt after every 8th step of an epoch.
"""
import json
import os
import random
import sys
import time

FILES, FILE_BYTES, SLICE, BATCH, EPOCHS, META_EVERY, COMPUTE_S = 4, 8 << 20, 256 << 10, 8, 2, 4, 0.020
CHECKPOINT_EVERY, CHECKPOINT_BYTES = 8, 256 << 10

data = sys.argv[1]
meta_path = os.path.join(data, "meta", "metadata.json")
if "--make" in sys.argv:
    os.makedirs(os.path.join(data, "meta"), exist_ok=True)
    for i in range(FILES):
        with open(os.path.join(data, f"shard_{i}.bin"), "wb") as f:
            f.write(os.urandom(FILE_BYTES))
    with open(meta_path, "w") as f:
        json.dump({"files": FILES, "slice": SLICE, "note": "x" * 150}, f)
    sys.exit(0)

shards = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".bin"))
handles = [os.open(s, os.O_RDONLY) for s in shards]
slices = [(h, off) for h in handles for off in range(0, FILE_BYTES, SLICE)]
rng = random.Random(11)
for epoch in range(EPOCHS):
    rng.shuffle(slices)
    for step in range(len(slices) // BATCH):
        if step % META_EVERY == 0:
            with open(meta_path) as f:
                json.load(f)
        for h, off in slices[step * BATCH:(step + 1) * BATCH]:
            assert len(os.pread(h, SLICE, off)) == SLICE
        time.sleep(COMPUTE_S)
        if (step + 1) % CHECKPOINT_EVERY == 0:
            os.makedirs(data + "_ckpt", exist_ok=True)
            with open(os.path.join(data + "_ckpt", f"ckpt_{epoch}_{step + 1}.bin"), "wb") as f:
                f.write(os.urandom(CHECKPOINT_BYTES))
for h in handles:
    os.close(h)
