"""moto's S3 server for dlio's tests, on a port it binds itself.

Binds 127.0.0.1 port 0 (the kernel's choice: no other process can be handed the same port
between a choice and a bind), prints the port on the first line of stdout, and serves until
its stdin is closed (the test that started it ended, however it ended).
"""
import sys

from moto.server import ThreadedMotoServer

server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()
server.stop()
