#!/usr/bin/env python3
"""A small HTTP server for hoard's remote-image tests and bench.

Serves one file at every path, with HEAD, byte ranges (206), ETag and
If-Match (412), on 127.0.0.1 only. It prints the port it listens on, then
serves until killed or until --lifetime seconds have passed.

Faults, set at start or at run time with GET /__set?key=value&...:
  delay_ms=N        pause before every answer (a slow link)
  fail_503=N        answer the next N range requests with 503
  drop_every=N      close every Nth request's connection without answering
  corrupt_at=N      flip the byte at image offset N in every answer holding it
  truncate=1        send half of each answer's body, then close
  down=1            close every connection at once (a server that is away)
GET /__stats gives {"requests", "bytes", "ranges"} (answered ranges);
GET /__reset zeroes them. Neither counts as a request.
"""

import argparse
import hashlib
import json
import os
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"delay_ms": 0, "fail_503": 0, "drop_every": 0, "corrupt_at": -1, "truncate": 0, "down": 0}
STATS = {"requests": 0, "bytes": 0, "ranges": [], "seen": 0}


def etag_of(path):
    st = os.stat(path)
    key = f"{st.st_size}-{st.st_mtime_ns}".encode()
    return '"' + hashlib.sha1(key).hexdigest()[:16] + '"'


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    path_to_file = ""

    def log_message(self, *args):
        pass

    def control(self):
        url = urllib.parse.urlparse(self.path)
        if url.path == "/__stats":
            with LOCK:
                body = json.dumps({k: STATS[k] for k in ("requests", "bytes", "ranges")}).encode()
        elif url.path == "/__reset":
            with LOCK:
                STATS.update(requests=0, bytes=0, ranges=[])
            body = b"{}"
        elif url.path == "/__set":
            with LOCK:
                for k, v in urllib.parse.parse_qsl(url.query):
                    STATE[k] = int(v)
            body = b"{}"
        else:
            return False
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return True

    def fault(self):
        """Applies connection faults; True when the request was dropped."""
        with LOCK:
            STATS["seen"] += 1
            seen = STATS["seen"]
            state = dict(STATE)
            STATS["requests"] += 1
        if state["delay_ms"]:
            time.sleep(state["delay_ms"] / 1000)
        if state["down"] or (state["drop_every"] and seen % state["drop_every"] == 0):
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass
            return True
        return False

    def do_HEAD(self):
        if self.fault():
            return
        self.send_response(200)
        self.send_header("Content-Length", str(os.path.getsize(self.path_to_file)))
        self.send_header("ETag", etag_of(self.path_to_file))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self):
        if self.control() or self.fault():
            return
        path = self.path_to_file
        size = os.path.getsize(path)
        etag = etag_of(path)
        match = self.headers.get("If-Match")
        if match and match != etag:
            self.send_error(412)
            return
        spec = self.headers.get("Range", "")
        if not spec.startswith("bytes=") or "," in spec:
            self.send_error(400, "byte range required")
            return
        first, _, last = spec[6:].partition("-")
        if first == "":
            start, end = max(0, size - int(last)), size
        else:
            start, end = int(first), min(size, int(last) + 1 if last else size)
        if start >= end:
            self.send_error(416)
            return
        with LOCK:
            if STATE["fail_503"] > 0:
                STATE["fail_503"] -= 1
                failing = True
            else:
                failing = False
            corrupt_at = STATE["corrupt_at"]
            truncate = STATE["truncate"]
        if failing:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        with open(path, "rb") as f:
            f.seek(start)
            body = bytearray(f.read(end - start))
        if start <= corrupt_at < end:
            body[corrupt_at - start] ^= 0xFF
        self.send_response(206)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.send_header("ETag", etag)
        self.end_headers()
        if truncate:
            body = body[: len(body) // 2]
            self.close_connection = True
        with LOCK:
            STATS["bytes"] += len(body)
            STATS["ranges"].append([start, start + len(body)])
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--lifetime", type=float, default=600, help="exit after this many seconds")
    for key in STATE:
        p.add_argument("--" + key.replace("_", "-"), type=int, default=STATE[key])
    args = p.parse_args()
    for key in STATE:
        STATE[key] = getattr(args, key)
    Handler.path_to_file = os.path.abspath(args.file)
    server = Server(("127.0.0.1", args.port), Handler)
    print(server.server_address[1], flush=True)
    threading.Timer(args.lifetime, lambda: os._exit(0)).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
