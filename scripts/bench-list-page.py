#!/usr/bin/env python3
"""Cost of one `list` page at many objects: starts a kvod (in memory), creates OBJECTS objects,
then times REQUESTS pipelined `{"op":"list","limit":1,"after":...}` requests, and prints the time
per page and kvod's resident set size.

Usage: scripts/bench-list-page.py [KVOD] [OBJECTS] [REQUESTS]
       (defaults: .build/release/kvod 200000 2000; build it with `swift build -c release --product kvod`)
"""
import json
import re
import socket
import subprocess
import sys
import time

kvod = sys.argv[1] if len(sys.argv) > 1 else ".build/release/kvod"
objects = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
requests = int(sys.argv[3]) if len(sys.argv) > 3 else 2000

server = subprocess.Popen([kvod, "--port", "0", "--in-memory", "--log-level", "warning"],
                          stdout=subprocess.PIPE, text=True)
try:
    port = int(re.search(r"(\d+)\s*$", server.stdout.readline()).group(1))
    connection = socket.create_connection(("127.0.0.1", port))
    replies = connection.makefile("rb")

    def pipelined(make, count, batch):
        done = 0
        while done < count:
            size = min(batch, count - done)
            connection.sendall("".join(make(done + i) for i in range(size)).encode())
            for _ in range(size):
                reply = replies.readline()
                if b'"ok":true' not in reply:
                    sys.exit("refused: %r" % reply)
            done += size

    def name(index):
        return "object-%08d" % ((index * 7919) % objects)

    def rss_kib():
        with open("/proc/%d/status" % server.pid) as status:
            return int(re.search(r"VmRSS:\s+(\d+)", status.read()).group(1))

    rss_empty = rss_kib()
    create_started = time.monotonic()
    pipelined(lambda i: '{"op":"create","id":%d,"object":"%s","values":{}}\n' % (i, name(i)), objects, 2000)
    create_seconds = time.monotonic() - create_started
    rss_full = rss_kib()
    started = time.monotonic()
    pipelined(lambda i: '{"op":"list","id":%d,"limit":1,"after":"%s"}\n' % (i, name(i * 104729)), requests, 500)
    elapsed = time.monotonic() - started
    print(json.dumps({"objects": objects, "create_seconds": round(create_seconds, 2), "pages": requests, "seconds": round(elapsed, 3),
                      "microseconds_per_page": round(elapsed / requests * 1e6, 1),
                      "rss_kib_empty": rss_empty, "rss_kib_with_objects": rss_full}))
finally:
    server.terminate()
    server.wait()
