"""fastq_tfdata.py -- genomics read classifier fed from plain FASTQ through tf.data.from_generator.

Sequencing-read models (read-level QC / contamination / basecall-error
classifiers) are often trained straight from the FASTQ files a sequencer
produced.  The FASTQ parser is ordinary Python text I/O (4 lines per record,
line-buffered iteration over a TextIOWrapper) wrapped in
tf.data.Dataset.from_generator, followed by a seeded shuffle buffer, batching
and prefetch.  The generator runs inside a TensorFlow py_func thread.

Data set layout (DATA/)
-----------------------
  SIM_S1_L001_R1_001.fastq .. SIM_S1_L004_R1_001.fastq   4 lane files,
  2000 records each (8000 reads).  One record is four '\n'-terminated lines:
      @SIM:1:FCX0014:<lane>:<tile>:<x>:<y> 1:N:0:ATCACG    (header, 44..46 chars)
      <L bases from ACGTN>                                  (sequence)
      +
      <L quality chars, Phred+33 '#'..'J'>
  L ~ Uniform{50 .. 250} (adapter-trimmed 2x250 reads), drawn per lane with
  seed [14003, lane], so a record is 2*L + 49..51 bytes (150..551, mean 350.5).
  Lane files are 710,641 / 701,342 / 694,496 / 697,209 bytes; the whole set is
  2,803,688 bytes.  Exact sizes are in --truth.

Training loop
-------------
  For each of 2 epochs: lane order = default_rng(14003 + epoch).permutation(4);
  ds = from_generator(parse lanes in that order) -> shuffle(4096,
  seed=14003+epoch, reshuffle_each_iteration=False) -> batch(128,
  drop_remainder=True) -> prefetch(2).  Each element: uint8[250] base codes
  (A=1 C=2 G=3 T=4 N=5, zero padded to 250), uint8[250] qualities, int32
  length, int32 lane label.  8000 // 128 = 62 steps per epoch (the 64 leftover
  reads are still parsed, so every byte of every file is read), 124 steps in
  total, each followed by time.sleep(0.010) of simulated compute.

What a syscall trace sees (strace -f, data files only)
------------------------------------------------------
  All file access happens in TensorFlow pool threads, never the main thread
  (the py_func generator hops between two tids per epoch, so group by process,
  not by tid), one lane file at a time, strictly sequentially:
      openat(lane, O_RDONLY|O_CLOEXEC)
      lseek(fd, 0, SEEK_CUR)                     (TextIOWrapper/tell probe)
      read(fd, 8192) ... read(fd, 8192)          floor(size/8192) full reads
      read(fd, 8192) = size % 8192               the tail
      read(fd, 8192) = 0                         EOF
      close(fd)
  i.e. ceil(size/8192) + 1 read calls per file (88/87/86/87), all 8192 bytes
  except the tail and the EOF probe, at increasing offsets.  No pread, no
  mmap of data files.  Reads are paced by the consumer: the shuffle buffer
  first pulls 4096 records (about 1.4 MB, ~175 reads: two whole lane files and
  the start of a third) before the first batch, then roughly 5.5 reads of
  8 KiB per 128-record step.
  Per epoch: 4 openat, 4 lseek, 348 reads (340 x 8192, 4 tails, 4 EOF
  probes), bytes = 2,803,688 = data set size.  Whole run: 8 opens, 8 lseeks,
  696 reads, 8 closes, 5,607,376 bytes.  Nothing is written (TensorFlow
  itself opens a few /proc and /sys files at start-up; those are not data
  files).
"""
import json
import os
import sys
import time

import numpy as np

NAME = "fastq_tfdata"
SEED = 14003
LANES = 4
READS = 2000
MIN_L, MAX_L = 50, 250
MAXLEN = 250
BATCH = 128
SHUFFLE = 4096
PREFETCH = 2
EPOCHS = 2
STEP_SLEEP = 0.010
CHUNK = 8192


def lane_file(lane):
    return f"SIM_S1_L{lane:03d}_R1_001.fastq"


def headers_and_lengths(lane):
    rng = np.random.default_rng([SEED, lane])
    L = rng.integers(MIN_L, MAX_L + 1, size=READS)
    tiles = rng.integers(1101, 2229, size=READS)
    xs = rng.integers(1000, 30000, size=READS)
    ys = rng.integers(1000, 99999, size=READS)
    hdr = [f"@SIM:1:FCX0014:{lane}:{t}:{x}:{y} 1:N:0:ATCACG" for t, x, y in zip(tiles, xs, ys)]
    return hdr, L


def record_sizes(lane):
    hdr, L = headers_and_lengths(lane)
    return np.array([len(h) + 1 for h in hdr]) + 2 * L + 4


def make(data):
    os.makedirs(data, exist_ok=True)
    bases = np.frombuffer(b"ACGT", np.uint8)
    for lane in range(1, LANES + 1):
        hdr, L = headers_and_lengths(lane)
        rng = np.random.default_rng([SEED, lane, 1])
        with open(os.path.join(data, lane_file(lane)), "w", encoding="ascii") as f:
            for h, n in zip(hdr, L):
                seq = bases[rng.integers(0, 4, size=n)]
                seq[rng.random(n) < 0.01] = ord("N")
                qual = rng.integers(35, 75, size=n, dtype=np.uint8)
                f.write(f"{h}\n{seq.tobytes().decode()}\n+\n{qual.tobytes().decode()}\n")
    print(f"wrote {LANES} FASTQ files to {data}")


def run(data):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    lut = np.zeros(256, np.uint8)
    for i, c in enumerate(b"ACGTN"):
        lut[c] = i + 1

    def parse_lanes(order):
        for lane in order:
            path = os.path.join(data, lane_file(int(lane)))
            with open(path, "r", encoding="ascii") as f:
                while True:
                    h = f.readline()
                    if not h:
                        break
                    s = f.readline().rstrip("\n")
                    f.readline()
                    q = f.readline().rstrip("\n")
                    n = len(s)
                    seq = np.zeros(MAXLEN, np.uint8)
                    qual = np.zeros(MAXLEN, np.uint8)
                    seq[:n] = lut[np.frombuffer(s.encode(), np.uint8)]
                    qual[:n] = np.frombuffer(q.encode(), np.uint8) - 33
                    yield seq, qual, np.int32(n), np.int32(lane - 1)

    sig = (tf.TensorSpec([MAXLEN], tf.uint8), tf.TensorSpec([MAXLEN], tf.uint8),
           tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int32))
    w = tf.Variable(tf.random.stateless_normal([MAXLEN, 4], seed=[1, 2]))
    t0 = time.time()
    steps = 0
    for epoch in range(EPOCHS):
        order = np.random.default_rng(SEED + epoch).permutation(LANES) + 1
        ds = tf.data.Dataset.from_generator(lambda o=tuple(order): parse_lanes(o),
                                            output_signature=sig)
        ds = ds.shuffle(SHUFFLE, seed=SEED + epoch, reshuffle_each_iteration=False)
        ds = ds.batch(BATCH, drop_remainder=True).prefetch(PREFETCH)
        for seq, qual, n, lane in ds:
            x = tf.cast(seq, tf.float32) * tf.cast(qual, tf.float32) / 40.0
            _ = tf.reduce_mean(tf.matmul(x, w))
            time.sleep(STEP_SLEEP)
            steps += 1
        print(f"epoch {epoch}: lanes {[int(o) for o in order]} steps={steps} t={time.time() - t0:.2f}s",
              flush=True)
    print(f"finished {steps} steps in {time.time() - t0:.2f}s")


def truth():
    files = {}
    rs = []
    for lane in range(1, LANES + 1):
        r = record_sizes(lane)
        rs.append(r)
        files[lane_file(lane)] = int(r.sum())
    rs = np.concatenate(rs)
    total = int(rs.sum())
    reads_per_file = {k: -(-v // CHUNK) + 1 for k, v in files.items()}
    per_epoch_reads = sum(reads_per_file.values())
    n = LANES * READS
    spe = n // BATCH
    return {
        "program": NAME,
        "format": "plain-text FASTQ (4 lines per read), one file per lane",
        "files": files,
        "num_files": LANES,
        "samples_per_file": READS,
        "num_samples": n,
        "sample_size_bytes": {"what": "one FASTQ record (4 lines)", "mean": float(rs.mean()),
                              "min": int(rs.min()), "max": int(rs.max()), "total_bytes": total},
        "dataset_bytes": total,
        "batch_size": BATCH,
        "readers": {"kind": "threads", "api": "tf.data.Dataset.from_generator (py_func thread)",
                    "count": 1},
        "prefetch": {"tf.data.prefetch": PREFETCH, "shuffle_buffer": SHUFFLE},
        "sampler": "sequential lanes in seeded per-epoch order + seeded shuffle buffer 4096",
        "epochs": EPOCHS,
        "steps_per_epoch": spe,
        "total_steps": spe * EPOCHS,
        "drop_remainder": True,
        "compute_time_per_step_s": STEP_SLEEP,
        "checkpoints": None,
        "io_api": "open(path,'r') TextIOWrapper readline -> read(fd, 8192)",
        "read_size_bytes": CHUNK,
        "expected_bytes_read_per_epoch": total,
        "expected_bytes_read_total": total * EPOCHS,
        "expected_read_calls": {"per_file": reads_per_file,
                                "per_epoch": {"read": per_epoch_reads, "lseek": LANES,
                                              "openat": LANES},
                                "total": {"read": per_epoch_reads * EPOCHS, "lseek": LANES * EPOCHS,
                                          "openat": LANES * EPOCHS}},
        "expected_bytes_written": 0,
        "deterministic_order": True,
        "needs": ["tensorflow"],
    }


def main():
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} DATA [--make|--truth]")
    data = sys.argv[1]
    if "--truth" in sys.argv[2:]:
        print(json.dumps(truth(), indent=2))
    elif "--make" in sys.argv[2:]:
        make(data)
    else:
        run(data)


if __name__ == "__main__":
    main()
