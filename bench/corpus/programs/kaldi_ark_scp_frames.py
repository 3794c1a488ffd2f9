"""Speech-recognition style loader over Kaldi ark/scp feature archives: a text index
(feats.scp, "utt_id ark_path:offset") points into a few large .ark files holding binary
float matrices; each utterance is loaded kaldiio-style (open the ark, seek to the offset,
parse a small binary header, read the matrix), in the main thread, in random order, and
batched by a FRAME budget (variable batch size). A dev-set pass after every epoch.

Data set (DATA/, about 62 MB):
  DATA/cmvn.npy                  global mean/variance stats, float64 (2, 40), 768 bytes;
  DATA/train/feats.scp           1200 lines "utt_XXXXX raw_feats.K.ark:OFFSET" (text, ~40 KB);
  DATA/train/utt2num_frames      1200 lines "utt_XXXXX FRAMES" (text, ~14 KB);
  DATA/train/raw_feats.{0..3}.ark  4 archives of 300 utterances each (13-14 MB each);
  DATA/dev/feats.scp, utt2num_frames  160 lines each (utt2num_frames not read);
  DATA/dev/raw_feats.0.ark       1 archive of 160 utterances (about 7 MB).
  Each ark entry is Kaldi's binary float matrix: b"utt_XXXXX " + b"\\0B" + b"FM " + b"\\4" +
  int32 rows + b"\\4" + int32 cols + rows*cols float32; the scp offset points at b"\\0B" (the
  15 bytes "\\0B" .. cols form the header). rows (frames) are lognormal (median 250,
  sigma 0.5, clipped to 50..1500), cols = 40, so each matrix is frames*160 bytes
  (8 KB .. 240 KB, mean about 45 KB), utterances back to back in scp order.

Training (main thread only, no workers, no prefetch): cmvn.npy and train/feats.scp are
read once at start, and so is train/utt2num_frames (for batching). Each epoch the 1200 utterances are permuted (numpy rng seeded
2718 + epoch) and cut greedily into batches of at most 6000 frames (a batch closes when
the next utterance would exceed the budget), so the batch size varies (about 9-40
utterances, ~21 on average) and the number of steps per epoch is fixed by the data (see
--truth). For each utterance load_mat() opens its ark with open(path, "rb") (a NEW open
per utterance, like kaldiio without fd caching), seeks to the offset, does 5 small
Python-level f.read() calls for the header (served from the buffer) and one f.read() of
the matrix, and closes the file. The main thread applies
CMVN, pads, and sleeps 15 ms per step. After each epoch the dev set is evaluated: dev
feats.scp read once per eval, utterances in scp order (sequential in the dev ark), batches
of 16 utterances (10 batches), 4 ms sleep per eval batch. 3 epochs. No checkpoint, no
writes.

What a syscall trace sees (strace -f -e trace=openat,read,lseek): one process, one thread
doing data I/O. cmvn.npy opened and read once (read(4096) = 768), train/feats.scp and
train/utt2num_frames opened once each and read with 8192-byte buffered text reads. Then
per training utterance: openat(train/raw_feats.K.ark, O_RDONLY|O_CLOEXEC), lseek(fd, 0,
SEEK_CUR), lseek(fd, OFFSET, SEEK_SET) to the entry, read(fd, 4096) = 4096 (Python's
BufferedReader, buffer = st_blksize 4096: the 15-byte header plus the first 4081 bytes of
the matrix), ONE read of the remaining whole 4 KiB blocks (read(fd, k*4096), e.g. 36864;
absent when the matrix fits in the next read), and a final read(fd, 4096) for the tail,
which normally returns a full 4096 bytes (over-reading up to ~4 KB into the next
utterance's entry), then close. So 2-3 reads per utterance, all at the utterance's offset
and sequential within it. The offsets visited are random within and across the 4 train arks
(1200 opens per epoch, each ark ~300 times per epoch, 3600 train opens in all); each matrix
is read once per epoch (plus <= 4 KB of over-read). Eval: dev/feats.scp re-read each eval
(read(8192) = 5413, read = 0), then 160 open/lseek/read/close cycles on
dev/raw_feats.0.ark with ascending offsets (a sequential sweep of that file, opened 160
times per eval, 480 in all). No files are written (only the python3 launcher's stderr
noise, if any).

Usage: kaldi_ark_scp_frames.py DATA [--make | --truth]
numpy only (runs with plain python3).
"""
import json
import os
import struct
import sys
import time

import numpy as np

N_TRAIN, N_DEV, ARKS, DIM = 1200, 160, 4, 40
FRAME_BUDGET, DEV_BATCH, EPOCHS, COMPUTE_S, EVAL_S = 6000, 16, 3, 0.015, 0.004
SEED = 2718
HEADER_BYTES = 15


def frames(n, seed):
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(250), 0.5, n), 50, 1500).astype(np.int64)


def train_frames():
    return frames(N_TRAIN, SEED)


def dev_frames():
    return frames(N_DEV, SEED + 1)


def batches_by_frames(order, lens):
    out, cur, tot = [], [], 0
    for i in order:
        n = int(lens[i])
        if cur and tot + n > FRAME_BUDGET:
            out.append(cur)
            cur, tot = [], 0
        cur.append(int(i))
        tot += n
    if cur:
        out.append(cur)
    return out


def epoch_batches(epoch, lens):
    rng = np.random.default_rng(SEED + epoch)
    return batches_by_frames(rng.permutation(len(lens)), lens)


def truth(data):
    tl, dl = train_frames(), dev_frames()
    steps = [len(epoch_batches(e, tl)) for e in range(EPOCHS)]
    bsz = [len(b) for e in range(EPOCHS) for b in epoch_batches(e, tl)]
    mat = tl * DIM * 4
    dev_steps = (N_DEV + DEV_BATCH - 1) // DEV_BATCH
    return {
        "program": "kaldi_ark_scp_frames", "needs": [],
        "format": "Kaldi ark (binary float matrices) indexed by text scp",
        "io_library": "python open/seek/read per utterance (kaldiio-style), main thread",
        "data_layout": "DATA/train/raw_feats.{0..3}.ark + feats.scp, DATA/dev/raw_feats.0.ark"
                       " + feats.scp, DATA/cmvn.npy",
        "num_files": ARKS, "samples_per_file": N_TRAIN // ARKS,
        "sample_size": {"dist": "lognormal", "frames_median": 250, "sigma": 0.5,
                        "frames_min": 50, "frames_max": 1500, "bytes_per_frame": DIM * 4,
                        "header_bytes": HEADER_BYTES, "min_bytes": int(mat.min()),
                        "max_bytes": int(mat.max()), "mean_bytes": int(mat.mean()),
                        "total_bytes": int(mat.sum())},
        "batch_size": {"kind": "frame budget", "max_frames": FRAME_BUDGET,
                       "utterances_min": min(bsz), "utterances_max": max(bsz),
                       "utterances_mean": round(float(np.mean(bsz)), 2)},
        "readers": {"kind": "main thread", "count": 1},
        "prefetch": None,
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": int(sum(steps)),
        "compute_s_per_step": COMPUTE_S,
        "shuffle": "utterance permutation per epoch (rng seed 2718 + epoch), greedy frame "
                   "budget batching",
        "eval": {"when": "after every epoch", "files": ["dev/feats.scp", "dev/raw_feats.0.ark"],
                 "samples": N_DEV, "batch_size": DEV_BATCH, "steps": dev_steps,
                 "order": "sequential", "compute_s_per_step": EVAL_S,
                 "bytes": int((dl * DIM * 4).sum())},
        "checkpoint": None,
        "side_files": [{"path": "cmvn.npy", "reads": "once"},
                       {"path": "train/feats.scp", "reads": "once"},
                       {"path": "train/utt2num_frames", "reads": "once"},
                       {"path": "dev/feats.scp", "reads": "once per eval"}],
        "file_opens": {"per_train_sample": 1, "train_total": EPOCHS * N_TRAIN,
                       "dev_total": EPOCHS * N_DEV},
        "read_pattern": "per utterance: open ark, lseek to offset, read(4096) (header + "
                        "start of matrix), one read of the remaining whole 4 KiB blocks, "
                        "read(4096) tail (over-reads into the next entry), close; random offsets "
                        "across 4 arks in training, ascending offsets in eval",
        "reads_per_sample": "2-3", "bytes_per_epoch": int(mat.sum()),
    }


def write_ark(dirpath, lens, prefix, n_arks, seed):
    os.makedirs(dirpath, exist_ok=True)
    rng = np.random.default_rng(seed)
    per = len(lens) // n_arks
    with open(os.path.join(dirpath, "feats.scp"), "w") as scp:
        for k in range(n_arks):
            ark = "raw_feats.%d.ark" % k
            with open(os.path.join(dirpath, ark), "wb") as f:
                for i in range(k * per, (k + 1) * per):
                    utt = "%s_%05d" % (prefix, i)
                    f.write(utt.encode() + b" ")
                    off = f.tell()
                    n = int(lens[i])
                    m = (rng.standard_normal((n, DIM), dtype=np.float32) * 3 + 10)
                    f.write(b"\0BFM \4" + struct.pack("<i", n) + b"\4" + struct.pack("<i", DIM))
                    f.write(m.tobytes())
                    scp.write("%s %s:%d\n" % (utt, ark, off))
    with open(os.path.join(dirpath, "utt2num_frames"), "w") as f:
        for i, n in enumerate(lens):
            f.write("%s_%05d %d\n" % (prefix, i, n))


def make(data):
    os.makedirs(data, exist_ok=True)
    np.save(os.path.join(data, "cmvn.npy"),
            np.stack([np.full(DIM, 10.0), np.full(DIM, 3.0)]))
    write_ark(os.path.join(data, "train"), train_frames(), "utt", ARKS, SEED + 10)
    write_ark(os.path.join(data, "dev"), dev_frames(), "dev", 1, SEED + 11)


def read_scp(path):
    base = os.path.dirname(path)
    out = []
    with open(path) as f:
        for line in f:
            utt, loc = line.split()
            ark, off = loc.rsplit(":", 1)
            out.append((utt, os.path.join(base, ark), int(off)))
    return out


def load_mat(ark, offset):
    with open(ark, "rb") as f:
        f.seek(offset)
        assert f.read(2) == b"\0B"
        assert f.read(3) == b"FM "
        f.read(1)
        rows = struct.unpack("<i", f.read(4))[0]
        f.read(1)
        cols = struct.unpack("<i", f.read(4))[0]
        return np.frombuffer(f.read(rows * cols * 4), dtype=np.float32).reshape(rows, cols)


def pad(mats, stats):
    longest = max(m.shape[0] for m in mats)
    out = np.zeros((len(mats), longest, DIM), dtype=np.float32)
    for k, m in enumerate(mats):
        out[k, :m.shape[0]] = (m - stats[0]) / stats[1]
    return out


def evaluate(data, stats):
    dev = read_scp(os.path.join(data, "dev", "feats.scp"))
    n = 0
    for s in range(0, len(dev), DEV_BATCH):
        x = pad([load_mat(a, o) for _, a, o in dev[s:s + DEV_BATCH]], stats)
        n += x.shape[0]
        time.sleep(EVAL_S)
    assert n == N_DEV


def train(data):
    stats = np.load(os.path.join(data, "cmvn.npy")).astype(np.float32)
    scp = read_scp(os.path.join(data, "train", "feats.scp"))
    assert len(scp) == N_TRAIN
    with open(os.path.join(data, "train", "utt2num_frames")) as f:
        lens = np.array([int(line.split()[1]) for line in f])
    assert (lens == train_frames()).all()
    for epoch in range(EPOCHS):
        for batch in epoch_batches(epoch, lens):
            mats = [load_mat(scp[i][1], scp[i][2]) for i in batch]
            assert sum(m.shape[0] for m in mats) <= FRAME_BUDGET or len(mats) == 1
            x = pad(mats, stats)
            time.sleep(COMPUTE_S)
        evaluate(data, stats)


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
