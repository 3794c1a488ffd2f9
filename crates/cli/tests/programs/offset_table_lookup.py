"""Offset-table lookups: shards that open with a table of their samples' offsets (as MosaicML's
MDS shards do), and a loader that, for each sample, opens its shard, reads the sample's two
table entries (8 bytes), seeks to the sample and reads it, then closes the shard.

Usage: offset_table_lookup.py DATA_DIR [--make]
Fixed by the program: 4 shards of 64 samples each; a shard is a uint32 count, 65 uint32
offsets (from the shard's start) and the samples, whose sizes are drawn once (seeded) between
2 and 12 KiB. Each epoch reads the 256 samples in a shuffled order, in batches of 8 (32 steps),
on one thread, with 10 ms of compute per batch; 2 epochs. Per sample: open, lseek, read(8),
lseek, read(sample), close: 512 reads an epoch, half of them 8 bytes.
"""
import os
import random
import struct
import sys
import time

SHARDS, PER_SHARD, BATCH, EPOCHS, COMPUTE_S = 4, 64, 8, 2, 0.010

data = sys.argv[1]
if "--make" in sys.argv:
    os.makedirs(data, exist_ok=True)
    sizes = random.Random(11)
    for s in range(SHARDS):
        samples = [os.urandom(sizes.randrange(2 << 10, 12 << 10)) for _ in range(PER_SHARD)]
        table_end = 4 + 4 * (PER_SHARD + 1)
        offsets = [table_end]
        for sample in samples:
            offsets.append(offsets[-1] + len(sample))
        with open(os.path.join(data, f"shard.{s:05d}.mds"), "wb") as f:
            f.write(struct.pack(f"<I{PER_SHARD + 1}I", PER_SHARD, *offsets))
            for sample in samples:
                f.write(sample)
    sys.exit(0)

shards = sorted(os.path.join(data, n) for n in os.listdir(data) if n.endswith(".mds"))
order = [(s, i) for s in range(len(shards)) for i in range(PER_SHARD)]
rng = random.Random(23)
for epoch in range(EPOCHS):
    rng.shuffle(order)
    for step in range(len(order) // BATCH):
        for s, i in order[step * BATCH:(step + 1) * BATCH]:
            with open(shards[s], "rb", buffering=0) as f:
                f.seek(4 + 4 * i)
                begin, end = struct.unpack("<II", f.read(8))
                f.seek(begin)
                assert len(f.read(end - begin)) == end - begin
        time.sleep(COMPUTE_S)
