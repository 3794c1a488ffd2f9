#!/usr/bin/env python3
"""A simulated S3 server whose bucket holds N objects named as `dlio generate` names npy files,
without storing them: ListObjectsV2 pages (1000 keys, delimiter "/") are written from the
index, and GET/HEAD of an object serve a valid npy of RECORD bytes. For measuring a client's
listing of 10^7 and 5x10^7 objects where no real server here could hold them.

Usage: s3-listing-server.py PORT N SUBFOLDERS [RECORD_BYTES] [PREFIX]
  keys: PREFIX/train/[SUB/]img_{i:0w}_of_{N}.npy (SUB padded to the digits of SUBFOLDERS, as
  generation pads it; no SUB when SUBFOLDERS <= 1). Requests are not authenticated.
Prints "ready" when it listens; on SIGTERM prints its counts (LIST pages, GETs, keys listed).
"""
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

PORT, N, SUBS = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
RECORD = int(sys.argv[4]) if len(sys.argv) > 4 else 4096
PREFIX = sys.argv[5] if len(sys.argv) > 5 else "data"
BUCKET = "bench"
WIDTH, SUB_WIDTH = len(str(N)), len(str(SUBS))
PAGE = 1000
HEADER = b"\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }" % RECORD
HEADER = HEADER + b" " * (127 - len(HEADER)) + b"\n"
BODY_LEN = len(HEADER) + RECORD
TRAIN = f"{PREFIX}/train/"
counts = {"list_pages": 0, "keys_listed": 0, "gets": 0, "heads": 0}
lock = threading.Lock()


def name(i):
    return f"img_{i:0{WIDTH}d}_of_{N}.npy"


def folder_keys(sub):
    """The indices in subfolder `sub` (all of them when there are no subfolders), in key order."""
    if SUBS <= 1:
        return range(N)
    return range(sub, N, SUBS)


def listing(prefix, token):
    """(keys with sizes, common prefixes, next token) of one page under `prefix`."""
    if SUBS > 1 and prefix == TRAIN:
        subs = [f"{TRAIN}{d:0{SUB_WIDTH}d}/" for d in range(SUBS)]
        start = int(token or 0)
        return [], subs[start:start + PAGE], (str(start + PAGE) if start + PAGE < len(subs) else None)
    if SUBS > 1 and prefix.startswith(TRAIN):
        sub_text = prefix[len(TRAIN):].rstrip("/")
        if not sub_text.isdigit() or len(sub_text) != SUB_WIDTH or int(sub_text) >= SUBS:
            return [], [], None
        indices, folder = folder_keys(int(sub_text)), prefix
    elif SUBS <= 1 and prefix == TRAIN:
        indices, folder = folder_keys(0), prefix
    elif prefix in (f"{PREFIX}/", ""):
        return [], [f"{PREFIX}/train/"] if prefix else [f"{PREFIX}/"], None
    else:
        return [], [], None
    start = int(token or 0)
    page = indices[start:start + PAGE]
    keys = [folder + name(i) for i in page]
    nxt = str(start + PAGE) if start + PAGE < len(indices) else None
    return keys, [], nxt


def index_of(key):
    leaf = key.rsplit("/", 1)[-1]
    if not (leaf.startswith("img_") and leaf.endswith(f"_of_{N}.npy")):
        return None
    digits = leaf[4:4 + WIDTH]
    if not digits.isdigit() or int(digits) >= N:
        return None
    i = int(digits)
    expected = TRAIN + (f"{i % SUBS:0{SUB_WIDTH}d}/" if SUBS > 1 else "") + name(i)
    return i if key == expected else None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def not_found(self):
        body = b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>"
        self.send(404, body, [("Content-Type", "application/xml")])

    def object(self, key):
        i = index_of(key)
        if i is None:
            return self.not_found()
        with lock:
            counts["gets" if self.command == "GET" else "heads"] += 1
        data = HEADER + bytes(RECORD)
        common = [("ETag", f'"{i:x}"'), ("Last-Modified", "Fri, 04 Dec 2026 00:00:00 GMT"),
                  ("Accept-Ranges", "bytes")]
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            a = int(a)
            b = min(int(b) if b else BODY_LEN - 1, BODY_LEN - 1)
            return self.send(206, data[a:b + 1], common + [("Content-Range", f"bytes {a}-{b}/{BODY_LEN}")])
        self.send(200, data, common)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urlsplit(self.path)
        path = unquote(url.path).lstrip("/")
        bucket, _, key = path.partition("/")
        if bucket != BUCKET:
            return self.not_found()
        query = parse_qs(url.query, keep_blank_values=True)
        if key:
            return self.object(key)
        if query.get("list-type") != ["2"]:
            return self.not_found()
        prefix = query.get("prefix", [""])[0]
        token = query.get("continuation-token", [None])[0]
        keys, prefixes, nxt = listing(prefix, token)
        with lock:
            counts["list_pages"] += 1
            counts["keys_listed"] += len(keys)
        parts = ['<?xml version="1.0" encoding="UTF-8"?>',
                 '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
                 f"<Name>{BUCKET}</Name><Prefix>{prefix}</Prefix><Delimiter>/</Delimiter>",
                 f"<MaxKeys>{PAGE}</MaxKeys><KeyCount>{len(keys) + len(prefixes)}</KeyCount>",
                 f"<IsTruncated>{'true' if nxt else 'false'}</IsTruncated>"]
        if nxt:
            parts.append(f"<NextContinuationToken>{nxt}</NextContinuationToken>")
        tail = (f"</Key><LastModified>2026-12-04T00:00:00.000Z</LastModified><ETag>&quot;0&quot;</ETag>"
                f"<Size>{BODY_LEN}</Size><StorageClass>STANDARD</StorageClass></Contents>")
        parts.extend(f"<Contents><Key>{k}{tail}" for k in keys)
        parts.extend(f"<CommonPrefixes><Prefix>{p}</Prefix></CommonPrefixes>" for p in prefixes)
        parts.append("</ListBucketResult>")
        self.send(200, "".join(parts).encode(), [("Content-Type", "application/xml")])


def stop(*_):
    print(" ".join(f"{k}={v}" for k, v in counts.items()), flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print("ready", flush=True)
server.serve_forever()
