"""A folder of JPEGs decoded with PIL in a PyTorch DataLoader of 3 persistent workers.

DATA/images/img_NNNN_cK.jpg: 256 JPEGs in one flat folder (the class K, 0..7, is in the file
name), written with PIL at quality 85, width and height each uniform over 96..160 px
(seeded), a gradient plus noise, so the files are 4.9 to 11.9 KiB (mean about 8 KiB, 2.1 MB
in all). A map-style Dataset lists the folder once (sorted) and, for index i, opens the file
with Image.open(path).convert("RGB") and returns torch.from_numpy(np.array(img)) permuted to
C x H x W, with the label. The DataLoader has batch_size 16, shuffle=True (seeded
generator), num_workers=3 (fork), persistent_workers=True (the same 3 processes serve both
epochs), prefetch_factor=2 (up to 6 batches, 96 files, requested ahead) and a collate_fn that
keeps the batch as a list (the images differ in size). The main process sleeps 10 ms per
batch. 256 / 16 = 16 steps an epoch, no partial batch.

What a syscall trace sees (strace -f -e trace=%file,read,pread64,readv,lseek,write): the main
process opens DATA/images once (O_DIRECTORY, getdents) and reads no data. The 3 worker
processes are forked (clone, no execve) when the first epoch starts and live to the end;
every image read is in a worker, one whole batch per worker, handed out round robin from
worker 0 at each epoch start (so 6, 5 and 5 batches an epoch: 192, 160 and 160 files over
the run). Per image: openat(O_RDONLY|O_CLOEXEC), newfstatat(fd, "", AT_EMPTY_PATH), (an
ioctl TCGETS that fails), lseek(0, SEEK_CUR), lseek(0, SEEK_SET), a buffered read of 4096
bytes at offset 0, then one read(61440) that returns the rest of the file (every file is
under 60 KiB) and one read(57344) that returns 0, close. So 3 reads per image, the file read
once front to back. On its first image each worker also imports JpegImagePlugin (openat/read
of .pyc files). Besides the data, each worker's queue feeder thread puts every sample tensor
in a fresh shared-memory segment: openat("/dev/shm/torch_<pid>_...", O_RDWR|O_CREAT|O_EXCL),
ftruncate, fallocate, a 1-byte write, mmap, unlink (one per sample, 512 in all, nothing read
from them by syscalls) plus about one 1.5 KB write of the pickled batch to the result pipe.
Each epoch starts with a burst of 6 batches (96 files) read by the 3 workers at once, then
about one batch is read per step. 512 image reads (2 per file), 1536 read calls, about
4.2 MB of data read; nothing is read across an epoch boundary.

Usage: jpeg_folder_torch_workers.py DATA [--make | --truth]
Fixed by the program: 256 JPEG files, 1 sample per file, batch 16, 3 persistent worker
processes, prefetch_factor 2, 2 epochs of 16 steps, 10 ms compute per step, shuffled per
epoch, no checkpoint, no eval. Needs torch, pillow and numpy.
"""
import json
import os
import sys
import time

import numpy as np
from PIL import Image

FILES, BATCH, WORKERS, PREFETCH, EPOCHS, COMPUTE_S = 256, 16, 3, 2, 2, 0.010
MIN_SIDE, MAX_SIDE, QUALITY, CLASSES = 96, 160, 85, 8
SEED = 9061


def image_sizes():
    rng = np.random.default_rng(SEED)
    wh = rng.integers(MIN_SIDE, MAX_SIDE + 1, (FILES, 2))
    return [(int(w), int(h)) for w, h in wh]


def file_names(data):
    d = os.path.join(data, "images")
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".jpg")) \
        if os.path.isdir(d) else []


def truth(data):
    sizes = image_sizes()
    fsz = np.array([os.path.getsize(f) for f in file_names(data)] or [0])
    steps = FILES // BATCH
    return {
        "program": "jpeg_folder_torch_workers", "needs": ["torch"], "format": "jpeg",
        "io_library": "PIL (Image.open + convert('RGB')) in torch DataLoader workers",
        "data_layout": "DATA/images/img_NNNN.jpg (flat folder, label in the file name)",
        "num_files": FILES, "samples_per_file": 1,
        "sample_size": {"dist": "varies (width and height uniform 96..160 px, RGB, JPEG q85)",
                        "decoded_bytes_mean": float(np.mean([w * h * 3 for w, h in sizes])),
                        "mean": float(fsz.mean()), "min": int(fsz.min()), "max": int(fsz.max()),
                        "median": float(np.median(fsz)), "total": int(fsz.sum())},
        "file_size": "as sample_size", "batch_size": BATCH, "drop_last": False,
        "readers": {"kind": "process", "count": WORKERS, "framework": "torch DataLoader",
                    "persistent": True, "start_method": "fork"},
        "prefetch": {"prefetch_factor": PREFETCH, "batches_in_flight": PREFETCH * WORKERS},
        "epochs": EPOCHS, "steps_per_epoch": steps, "total_steps": EPOCHS * steps,
        "files_read_per_epoch": FILES, "compute_s_per_step": COMPUTE_S,
        "shuffle": "files, per epoch", "eval": None, "checkpoint": None, "side_files": [],
        "read_pattern": "per image: open, a 4 KiB buffered read, one read of the rest of the "
                        "file, close (3 reads, whole file once); each batch read by one "
                        "worker process, up to 6 batches ahead",
    }


def make(data):
    d = os.path.join(data, "images")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    for i, (w, h) in enumerate(image_sizes()):
        yy, xx = np.mgrid[0:h, 0:w]
        c = i % CLASSES
        base = np.stack([xx * 255 // w, yy * 255 // h, np.full_like(xx, 30 * c)], -1)
        img = np.clip(base + rng.normal(0, 25, (h, w, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(os.path.join(d, f"img_{i:04d}_c{c}.jpg"), quality=QUALITY)


def keep_list(batch):
    return batch


def train(data):
    import torch
    from torch.utils.data import DataLoader, Dataset

    class JpegFolder(Dataset):
        def __init__(self, names):
            self.names = names
            self.labels = [int(os.path.basename(n).split("_c")[1][:-4]) for n in names]

        def __len__(self):
            return len(self.names)

        def __getitem__(self, i):
            img = Image.open(self.names[i]).convert("RGB")
            x = torch.from_numpy(np.array(img)).permute(2, 0, 1)
            return x, self.labels[i]

    loader = DataLoader(JpegFolder(file_names(data)), batch_size=BATCH, shuffle=True,
                        num_workers=WORKERS, persistent_workers=True, prefetch_factor=PREFETCH,
                        collate_fn=keep_list, generator=torch.Generator().manual_seed(SEED),
                        multiprocessing_context="fork")
    for epoch in range(EPOCHS):
        steps = 0
        for batch in loader:
            assert len(batch) == BATCH and all(x.shape[0] == 3 for x, _ in batch)
            time.sleep(COMPUTE_S)
            steps += 1
        assert steps == FILES // BATCH


if __name__ == "__main__":
    data = sys.argv[1]
    if "--make" in sys.argv:
        make(data)
    elif "--truth" in sys.argv:
        print(json.dumps(truth(data), indent=1))
    else:
        train(data)
