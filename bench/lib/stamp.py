#!/usr/bin/env python3
"""Copies stdin to stdout, each line prefixed with CLOCK_MONOTONIC seconds: `12345.678901 line`.
Used to time `wanlab run`'s progress lines (one per probe repeat) from outside the process.
Reads unbuffered, so each line is stamped when it arrives. With an argument, creates that
file once ready to read, so the writer can wait for it (Python's start-up can take longer than
a short run)."""
import os
import sys
import time

if len(sys.argv) > 1:
    open(sys.argv[1], "w").close()

buf = b""
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    now = time.monotonic()
    buf += chunk
    *lines, buf = buf.split(b"\n")
    for line in lines:
        os.write(1, b"%.6f " % now + line + b"\n")
if buf:
    os.write(1, b"%.6f " % time.monotonic() + buf + b"\n")
