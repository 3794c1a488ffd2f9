"""LoRA fine-tuning of a frozen pretrained transformer: the backbone comes from
a hand-parsed ``.safetensors`` file (mmap, partial use), the small token data
set is preloaded, and HF-Trainer-style ``checkpoint-N/`` directories are
written atomically and rotated (save_total_limit=2).

Data set (``--make``, seed 15003)
---------------------------------
``DATA/pretrained/config.json``      ~0.2 KB model config
``DATA/pretrained/tokenizer.json``   vocab of 8,192 entries, ~0.2 MB
``DATA/pretrained/model.safetensors`` safetensors layout: 8-byte little-endian
    header length, JSON header (space-padded to a multiple of 8), then raw
    tensors in name order.  Tensors: ``embed.weight`` [8192, 512] F16
    (8 MiB), ``lm_head.weight`` [8192, 512] F16 (8 MiB, NOT used by the
    fine-tune), 12 layers x {``attn.qkv.weight`` [1536, 512] F16,
    ``mlp.up.weight`` [1024, 512] F16, ``mlp.down.weight`` [512, 1024] F16,
    ``norm.weight`` [512] F32}; 4,728-byte header, 60,841,984 tensor bytes,
    60,846,720-byte file.  Name order puts lm_head.weight last (final 8 MiB).
``DATA/data/train-0000-of-0003.npy`` .. ``-0002``  3 shards, uint16
    [2048, 256] token ids each (1,048,704 bytes incl. 128-byte npy header).
``DATA/data/val.npy``               uint16 [512, 256] (262,272 bytes).
Total ~63 MB.

Training loop
-------------
Start-up: ``json.load`` config.json and tokenizer.json; parse the
safetensors header with two ``f.read`` calls (8 bytes, then header length),
``mmap`` the whole file read-only and copy every tensor except
``lm_head.weight`` out of the mapping (``np.frombuffer(...).astype
(float32)``) -- 52.45 MB of the 60.85 MB mapping is touched, in file order.
Then ``np.load`` (no mmap) the 3 train shards and val.npy fully into RAM.
Training runs from RAM: 6,144 sequences per epoch, shuffled per epoch,
micro-batch 32, gradient accumulation 4 -> 128 sequences per optimizer
step, 48 optimizer steps/epoch, 3 epochs, 144 steps.  Compute:
``time.sleep(0.025)`` per optimizer step (covering the 4 micro-batches).
Eval at the end of every epoch on the preloaded val set (no I/O,
``time.sleep(0.05)``).
Checkpoints (the only writes into DATA): at steps 40, 80, 120 and 144 a
directory ``DATA/output/checkpoint-N.tmp/`` is created holding
``adapter_model.safetensors`` (LoRA A/B, rank 16, F32, 3,932,160 tensor
bytes), ``optimizer.npz`` (np.savez, Adam m and v: 2 x 3,932,160 bytes)
and ``trainer_state.json``; each file is fsync'ed, then the directory is
``os.replace``d onto ``checkpoint-N``; only the 2 newest checkpoints are kept
(older ones removed with ``shutil.rmtree``), so checkpoint-40 and -80 are
deleted during the run.  A leftover ``DATA/output`` from a previous run is
removed at start-up.

What a syscall trace sees (measured with strace)
------------------------------------------------
* start: ``openat`` + whole-file read of config.json (195 B) and
  tokenizer.json (228,309 B, one read); ``openat`` model.safetensors and two
  buffered 4,096-byte ``read``s (8-byte length + 4,728-byte JSON header),
  then ONE ``mmap(NULL, 60846720, PROT_READ, MAP_SHARED, fd, 0)``; the
  tensors then arrive by page faults only (no read syscalls), sequentially
  from offset 4,736 to 52,458,112, never touching the last 8 MiB (lm_head).
  Each of the 4 .npy files: ``openat``, a 4 KiB read on the Python fd, then
  numpy reads through a dup'ed fd: 128-byte header read, 4 KiB read, one
  big ``read`` (1,044,480 bytes for a train shard) and a short tail read.
  In total only ~3.4 MB go through read(); ~52 MB come in via mmap.
* steady state: no reads at all (everything in RAM).
* 4 checkpoint bursts (steps 40, 80, 120, 144), each: ``mkdir``
  checkpoint-N.tmp; adapter_model.safetensors: ``openat(O_WRONLY|O_CREAT|
  O_TRUNC)``, 8-byte + ~4 KB header writes, then one ``write`` per tensor
  (72 tensors: 32,768 / 65,536 / 98,304 bytes), ``fsync``;
  optimizer.npz (zipfile via np.savez): per array a 208-byte local header,
  32,768-byte data writes, ``lseek`` back and an 80-byte header rewrite
  (144 members, 7.9 MB), ``fsync``; trainer_state.json (~170 B), ``fsync``;
  ``rename`` of the directory to checkpoint-N; at steps 120 and 144
  ``unlinkat`` x3 + ``rmdir`` of the oldest checkpoint.  47.4 MB written
  in all (11.84 MB per checkpoint).  At start-up a previous run's
  ``DATA/output`` is removed (``unlinkat``/``rmdir``) and re-created.
"""
import json
import mmap
import os
import shutil
import sys
import time

import numpy as np

SEED = 15003
VOCAB, D, FF, LAYERS = 8192, 512, 1024, 12
SEQ, SHARD_ROWS, N_SHARDS, VAL_ROWS = 256, 2048, 3, 512
MICRO, ACCUM, EPOCHS = 32, 4, 3
RANK = 16
COMPUTE_S = 0.025
EVAL_S = 0.05
SAVE_STEPS = 40
SAVE_TOTAL_LIMIT = 2
DT = {"F16": np.float16, "F32": np.float32}
DT_NAME = {np.dtype(np.float16): "F16", np.dtype(np.float32): "F32"}


def write_safetensors(path, tensors, metadata=None):
    header, off = {}, 0
    for name in sorted(tensors):
        a = tensors[name]
        header[name] = {"dtype": DT_NAME[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for name in sorted(tensors):
            f.write(np.ascontiguousarray(tensors[name]).tobytes())
        f.flush()
        os.fsync(f.fileno())


def backbone_shapes():
    shapes = {"embed.weight": ((VOCAB, D), np.float16), "lm_head.weight": ((VOCAB, D), np.float16)}
    for i in range(LAYERS):
        shapes["layers.%d.attn.qkv.weight" % i] = ((3 * D, D), np.float16)
        shapes["layers.%d.mlp.up.weight" % i] = ((FF, D), np.float16)
        shapes["layers.%d.mlp.down.weight" % i] = ((D, FF), np.float16)
        shapes["layers.%d.norm.weight" % i] = ((D,), np.float32)
    return shapes


def adapter_shapes():
    s = {}
    for i in range(LAYERS):
        for mod, (o, n) in (("attn.qkv", (3 * D, D)), ("mlp.up", (FF, D)), ("mlp.down", (D, FF))):
            s["layers.%d.%s.lora_A" % (i, mod)] = (RANK, n)
            s["layers.%d.%s.lora_B" % (i, mod)] = (o, RANK)
    return s


def make(data):
    rng = np.random.default_rng(SEED)
    pre, dd = os.path.join(data, "pretrained"), os.path.join(data, "data")
    os.makedirs(pre, exist_ok=True)
    os.makedirs(dd, exist_ok=True)
    with open(os.path.join(pre, "config.json"), "w") as f:
        json.dump({"model_type": "toy-decoder", "vocab_size": VOCAB, "hidden_size": D,
                   "intermediate_size": FF, "num_hidden_layers": LAYERS, "torch_dtype": "float16",
                   "max_position_embeddings": SEQ}, f, indent=2)
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    for i in range(3, VOCAB):
        vocab["tok%05d_%s" % (i, "".join(chr(97 + c) for c in rng.integers(0, 26, size=6)))] = i
    with open(os.path.join(pre, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "model": {"type": "WordLevel", "vocab": vocab}}, f, indent=1)
    tensors = {}
    for name, (shape, dt) in backbone_shapes().items():
        tensors[name] = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(dt)
    write_safetensors(os.path.join(pre, "model.safetensors"), tensors, {"format": "np"})
    for k in range(N_SHARDS):
        np.save(os.path.join(dd, "train-%04d-of-%04d.npy" % (k, N_SHARDS)),
                rng.integers(3, VOCAB, size=(SHARD_ROWS, SEQ), dtype=np.uint16))
    np.save(os.path.join(dd, "val.npy"), rng.integers(3, VOCAB, size=(VAL_ROWS, SEQ), dtype=np.uint16))


def load_safetensors(path, skip=()):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    base = 8 + n
    out = {}
    items = sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                   key=lambda kv: kv[1]["data_offsets"][0])
    for name, info in items:
        if name in skip:
            continue
        a, b = info["data_offsets"]
        dt = np.dtype(DT[info["dtype"]])
        arr = np.frombuffer(mm, dtype=dt, count=(b - a) // dt.itemsize, offset=base + a)
        out[name] = arr.reshape(info["shape"]).astype(np.float32)
        del arr
    mm.close()
    return out


def save_checkpoint(outdir, step, adapter, m, v, history):
    final = os.path.join(outdir, "checkpoint-%d" % step)
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    write_safetensors(os.path.join(tmp, "adapter_model.safetensors"), adapter,
                      {"format": "np", "step": str(step)})
    opath = os.path.join(tmp, "optimizer.npz")
    with open(opath, "wb") as f:
        np.savez(f, **{"m." + k: m[k] for k in m}, **{"v." + k: v[k] for k in v})
        f.flush()
        os.fsync(f.fileno())
    with open(os.path.join(tmp, "trainer_state.json"), "w") as f:
        json.dump({"global_step": step, "log_history": history[-4:]}, f)
        f.flush()
        os.fsync(f.fileno())
    if os.path.exists(final):
        shutil.rmtree(final)
    os.replace(tmp, final)
    ck = sorted((d for d in os.listdir(outdir) if d.startswith("checkpoint-") and not d.endswith(".tmp")),
                key=lambda d: int(d.split("-")[1]))
    for old in ck[:-SAVE_TOTAL_LIMIT]:
        shutil.rmtree(os.path.join(outdir, old))


def train(data):
    t0 = time.time()
    pre, dd = os.path.join(data, "pretrained"), os.path.join(data, "data")
    with open(os.path.join(pre, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(pre, "tokenizer.json")) as f:
        tok = json.load(f)
    assert len(tok["model"]["vocab"]) == cfg["vocab_size"]
    backbone = load_safetensors(os.path.join(pre, "model.safetensors"), skip=("lm_head.weight",))
    shards = [np.load(os.path.join(dd, "train-%04d-of-%04d.npy" % (k, N_SHARDS))) for k in range(N_SHARDS)]
    train_x = np.concatenate(shards)
    val_x = np.load(os.path.join(dd, "val.npy"))
    print("loaded %d backbone tensors, %d train seqs in %.2fs" % (len(backbone), len(train_x), time.time() - t0))

    outdir = os.path.join(data, "output")
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    rng = np.random.default_rng(0)
    adapter = {k: (rng.standard_normal(s, dtype=np.float32) * 0.01 if k.endswith("lora_A")
                   else np.zeros(s, np.float32)) for k, s in adapter_shapes().items()}
    m = {k: np.zeros_like(a) for k, a in adapter.items()}
    v = {k: np.zeros_like(a) for k, a in adapter.items()}
    emb = backbone["embed.weight"]
    per_step = MICRO * ACCUM
    steps_per_epoch = len(train_x) // per_step
    step, history = 0, []
    for epoch in range(EPOCHS):
        order = np.random.default_rng(SEED + epoch).permutation(len(train_x))
        for s in range(steps_per_epoch):
            loss = 0.0
            for a in range(ACCUM):
                idx = order[s * per_step + a * MICRO: s * per_step + (a + 1) * MICRO]
                h = emb[train_x[idx, :8]].mean(axis=(0, 1))
                loss += float(h @ h)
            time.sleep(COMPUTE_S)
            for k in ("layers.0.attn.qkv.lora_B",):
                m[k] = 0.9 * m[k] + 1e-4
                v[k] = 0.999 * v[k] + 1e-8
                adapter[k] -= 1e-3 * m[k] / (np.sqrt(v[k]) + 1e-8)
            step += 1
            history.append({"step": step, "loss": round(loss / ACCUM, 6)})
            if step % SAVE_STEPS == 0 or step == EPOCHS * steps_per_epoch:
                save_checkpoint(outdir, step, adapter, m, v, history)
        time.sleep(EVAL_S)
        ev = float(emb[val_x[:, :8]].mean())
        print("epoch %d: step %d eval %.5f %.2fs" % (epoch, step, ev, time.time() - t0))
    print("trained %d steps in %.2fs; kept %s" % (step, time.time() - t0, sorted(os.listdir(outdir))))


def truth():
    spe = N_SHARDS * SHARD_ROWS // (MICRO * ACCUM)
    total = EPOCHS * spe
    saves = sorted(set(list(range(SAVE_STEPS, total + 1, SAVE_STEPS)) + [total]))
    sample = SEQ * 2
    return {
        "program": "safetensors_lora_finetune_rotate",
        "needs": [],
        "format": "safetensors (pretrained weights, mmap) + npy token shards (preloaded)",
        "io_library": "mmap + json + numpy (np.load, np.savez)",
        "data_layout": "pretrained/{config.json,tokenizer.json,model.safetensors 60.8MB}; "
                       "data/train-000k-of-0003.npy (3 x [2048,256] uint16) + val.npy; all read once at start-up",
        "num_files": N_SHARDS + 1 + 3,
        "samples_per_file": SHARD_ROWS,
        "sample_size": {"dist": "fixed", "min": sample, "max": sample, "mean": sample},
        "batch_size": MICRO,
        "grad_accumulation": ACCUM,
        "samples_per_step": MICRO * ACCUM,
        "readers": {"kind": "main", "count": 1},
        "prefetch": 0,
        "preload": "whole data set (3 MiB) + 52.45 MB of 60.85 MB safetensors mmap touched at start-up",
        "epochs": EPOCHS,
        "steps_per_epoch": spe,
        "total_steps": total,
        "compute_s_per_step": COMPUTE_S,
        "shuffle": True,
        "eval": {"every": "epoch", "samples": VAL_ROWS, "io": "none (val.npy preloaded)", "compute_s": EVAL_S},
        "checkpoint": {"steps": saves, "layout": "DATA/output/checkpoint-N/{adapter_model.safetensors,"
                       "optimizer.npz,trainer_state.json}", "method": "write to checkpoint-N.tmp, fsync, os.replace dir",
                       "keep_last": SAVE_TOTAL_LIMIT, "approx_bytes_each": 11844134},
    }


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: safetensors_lora_finetune_rotate.py DATA [--make|--truth]")
    if "--truth" in sys.argv:
        print(json.dumps(truth()))
    elif "--make" in sys.argv:
        make(sys.argv[1])
    else:
        train(sys.argv[1])
