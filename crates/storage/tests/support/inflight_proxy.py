"""An HTTP proxy in front of an S3 server that measures how many GET requests a client keeps
in flight: each GET of an object is held for DELAY seconds before it is forwarded, and the
most GETs open at one time is written to REPORT whenever it grows.

usage: inflight_proxy.py PORT UPSTREAM_URL DELAY REPORT [THROTTLE]
The tests start it with PORT 0 (it writes the port it listens on to REPORT.port) and point the
client's endpoint at it; moto (the upstream)
accepts the forwarded requests as they are (it does not check signatures).

THROTTLE answers object GETs with S3's throttling reply (503 SlowDown) instead of forwarding
them: `alternate` every other one (a client that retries gets each object on its second
try), `always` every one. REPORT holds "MOST GETS THROTTLED HEADS" (HEADS: object HEAD
requests, each a request per object that a listing could have answered).
"""

import http.client
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, UPSTREAM, DELAY, REPORT = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
THROTTLE = sys.argv[5] if len(sys.argv) > 5 else "none"
SLOWDOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
upstream = urllib.parse.urlparse(UPSTREAM)
lock = threading.Lock()
state = {"open": 0, "most": 0, "gets": 0, "throttled": 0, "heads": 0}


def report():
    with open(REPORT + ".tmp", "w") as f:
        f.write(f"{state['most']} {state['gets']} {state['throttled']} {state['heads']}\n")
    import os

    os.replace(REPORT + ".tmp", REPORT)


class Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        # An object GET (not a bucket listing) is what the window keeps in flight.
        counted = self.command == "GET" and "list-type" not in self.path and self.path.count("/") > 1
        if self.command == "HEAD" and self.path.count("/") > 1:
            with lock:
                state["heads"] += 1
                report()
        if counted:
            with lock:
                state["gets"] += 1
                throttle = THROTTLE == "always" or (THROTTLE == "alternate" and state["gets"] % 2 == 1)
                if throttle:
                    state["throttled"] += 1
                else:
                    state["open"] += 1
                    state["most"] = max(state["most"], state["open"])
                report()
            if throttle:
                self.send_response(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(SLOWDOWN)))
                self.end_headers()
                self.wfile.write(SLOWDOWN)
                return
            time.sleep(DELAY)
        try:
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
            conn.request(self.command, self.path, body=body, headers=headers)
            reply = conn.getresponse()
            data = reply.read()
        finally:
            if counted:
                with lock:
                    state["open"] -= 1
        self.send_response(reply.status)
        for k, v in reply.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        # A HEAD reply has no body but tells the object's length.
        length = reply.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length or str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = forward


ThreadingHTTPServer.daemon_threads = True
server = ThreadingHTTPServer(("127.0.0.1", PORT), Forward)
# PORT 0: the system picks a free port, written to REPORT.port once the proxy listens on it
# (a port picked by the caller and bound here later could be taken in between).
if PORT == 0:
    with open(REPORT + ".port.partial", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(REPORT + ".port.partial", REPORT + ".port")
report()
server.serve_forever()
