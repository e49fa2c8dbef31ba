#!/usr/bin/env python3
"""Hostile HTTP probes against a running dpsilod (issue 10, reliability report probe 3).

    hostile_http.py --port PORT [--rounds N] [--seconds S] [--workers W]

Each probe sends raw bytes on its own connection to 127.0.0.1:PORT and reads what comes back. A probe
passes when every status line it gets is one the probe allows (None = the server may close without
answering) and no answer is a 5xx other than the ones named. After every round /healthz must answer
200 on a fresh connection. The short form (one round) runs in `make test`; `make soak` runs it for
--seconds with --workers threads and checks that the daemon's open files and memory do not grow.

Prints one line per failure and a closing line "hostile: N passed, M failed"; exit status 1 on failure.
"""
import argparse
import re
import socket
import sys
import threading
import time

STATUS_RE = re.compile(rb"HTTP/1\.[01] (\d{3})")


def exchange(port, data, timeout=3.0, shut=False):
    """Sends data, reads until the server closes or goes quiet; returns the list of statuses."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out = b""
    try:
        try:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may close while we are still sending (an early 413/431)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            s.settimeout(0.5)  # after the first bytes, stop when the server goes quiet
    finally:
        s.close()
    # status lines (a pipelined answer follows the previous JSON body without a line break; no body
    # we send back contains "HTTP/1.x NNN")
    return [int(m.group(1)) for m in STATUS_RE.finditer(out)], out


def post(path, body, extra=b""):
    if isinstance(body, str):
        body = body.encode()
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + extra + b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n"
            + body)


def get(path, extra=b""):
    if isinstance(path, str):
        path = path.encode()
    return b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + extra + b"Connection: close\r\n\r\n"


EPS = "/v1/accounting/epsilon"
GOOD = '{"event":{"type":"gaussian","noise_multiplier":1},"delta":1e-5}'

SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"

# (name, bytes, allowed statuses of the FIRST answer; None in the set = closing without an answer is fine)
PROBES = [
    ("plain GET", get("/healthz"), {200}),
    ("valid POST", post(EPS, GOOD), {200}),
    ("100 KB header", get("/healthz", b"X-Big: " + b"a" * 100000 + b"\r\n"), {431, 400, 413, None}),
    ("5000 headers", get("/healthz", b"".join(b"X-H%d: v\r\n" % i for i in range(5000))),
     {431, 400, 413, None}),
    ("200 KB URL", get("/healthz?" + "a" * 200000), {414, 400, 431, None}),
    ("header line without colon", get("/healthz", b"NoColonHere\r\n"), {400, None}),
    ("HTTP/0.9 request line", b"GET /healthz\r\n\r\n", {400, 505, None}),
    ("HTTP/1.0 request", b"GET /healthz HTTP/1.0\r\n\r\n", {200}),
    ("HTTP/2.0 request line", b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", {505, 400, None}),
    ("HTTP/9.9 request line", b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", {505, 400, None}),
    ("h2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", {505, 400, 404, 405, None}),
    ("lowercase method", b"get /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
     {400, 404, 405, 501, None}),
    ("absolute-form target", get("http://x/healthz"), {200, 400, 404}),
    ("Content-Length +16", b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: +16\r\n\r\n"
     b'{"message":"hi"}', {400, None}),
    ("Content-Length -1", b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", {400, None}),
    ("Content-Length 0x10", b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0x10\r\n\r\n"
     b'{"message":"hi"}', {400, None}),
    ("Content-Length 2^64+16", b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: "
     b"18446744073709551632\r\n\r\n", {400, 413, None}),
    ("bad chunk size", b"POST " + EPS.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"zz\r\nabc\r\n0\r\n\r\n", {400, None}),
    ("huge chunk", b"POST " + EPS.encode() + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"fffffffffffffff\r\nabc", {400, 413, None}),
    ("unknown transfer-encoding", b"POST " + EPS.encode() + b" HTTP/1.1\r\nHost: x\r\n"
     b"Transfer-Encoding: gzip\r\n\r\nabc", {400, 411, 501, None}),
    ("body over the route cap", post("/v1/echo", '{"message":"' + "a" * 8000 + '"}'), {413, 401}),
    ("Expect 100-continue over the cap", b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
     b"Content-Length: 99999999\r\n\r\n", {413, 401, None}),
    ("invalid UTF-8", post(EPS, b'{"event":"\xff\xfe"}'), {400}),
    ("overlong UTF-8", post(EPS, b'{"event":"\xc0\xaf"}'), {400}),
    ("lone surrogate", post(EPS, '{"event":"\\ud800"}'), {400}),
    ("escaped NUL", post(EPS, '{"event":"a\\u0000b"}'), {400}),
    ("raw NUL after a number", post(EPS, b'{"delta":1e-5\x00}'), {400}),
    ("byte-order mark", post(EPS, b"\xef\xbb\xbf" + GOOD.encode()), {400}),
    ("1e999", post(EPS, '{"event":{"type":"gaussian","noise_multiplier":1e999},"delta":1e-5}'), {400}),
    ("NaN", post(EPS, '{"event":{"type":"gaussian","noise_multiplier":NaN},"delta":1e-5}'), {400}),
    ("Infinity", post(EPS, '{"event":{"type":"gaussian","noise_multiplier":Infinity},"delta":1e-5}'), {400}),
    ("2^63", post(EPS, '{"event":{"type":"self_composed","count":9223372036854775808,"event":'
     '{"type":"gaussian","noise_multiplier":1}},"delta":1e-5}'), {400, 422}),
    ("duplicate keys", post(EPS, '{"delta":1e-5,"delta":1e-6,"event":{"type":"pure","epsilon":1}}'), {400}),
    ("trailing garbage", post(EPS, GOOD + "xyz"), {400}),
    ("array body", post(EPS, "[1,2,3]"), {400}),
    ("deep nesting", post(EPS, "[" * 100000 + "]" * 100000), {400, 413}),
    ("deep event tree", post(EPS, '{"delta":1e-5,"event":' + '{"type":"self_composed","count":2,"event":' * 2000
     + '{"type":"pure","epsilon":1}' + "}" * 2001), {400, 413, 422}),
    ("NUL in path", get("/healthz%00"), {404}),
    ("path traversal", get("/../../etc/passwd"), {404, 400}),
    ("encoded traversal", get("/%2e%2e/%2e%2e/etc/passwd"), {404, 400}),
    ("33 query parameters", get("/healthz?" + "&".join("q%d=1" % i for i in range(33))), {400}),
    ("control characters in the path", get("/v1/silos/%1b[31mred"), {400, 401, 404}),
    ("wrong content type", post(EPS, GOOD).replace(b"application/json", b"text/plain"), {200, 400, 415}),
    ("empty body on a body route", post(EPS, ""), {400}),
    # obs-fold (RFC 9112 5.2) on a framing header: the folded bytes must not be served as a second
    # request (run_round also requires a single status line for these)
    ("obs-fold SP on Content-Length", b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n 0\r\n\r\n"
     % len(SMUGGLED) + SMUGGLED, {400, None}),
    ("obs-fold HT on Content-Length", b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\t0\r\n\r\n"
     % len(SMUGGLED) + SMUGGLED, {400, None}),
    ("obs-fold on Transfer-Encoding", b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
     b" x\r\n\r\n0\r\n\r\n" + SMUGGLED, {400, None}),
]


def pipelined(port, n=50):
    """n requests in one write; n answers in order."""
    data = b"".join(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: p%d\r\n\r\n" % i for i in range(n - 1))
    data += b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: p%d\r\nConnection: close\r\n\r\n" % (n - 1)
    statuses, raw = exchange(port, data, timeout=5.0)
    ids = re.findall(rb"X-Request-Id: (p\d+)", raw, re.I)
    return statuses == [200] * n and ids == [b"p%d" % i for i in range(n)]


def healthy(port):
    try:
        st, _ = exchange(port, get("/healthz"))
        return st[:1] == [200]
    except OSError:
        return False


def run_round(port, fails, lock):
    for name, data, allowed in PROBES:
        try:
            statuses, _ = exchange(port, data)
        except OSError as e:
            statuses, err = [], e
        else:
            err = None
        first = statuses[0] if statuses else None
        bad5xx = [s for s in statuses if s >= 500 and s not in allowed]
        smuggled = name.startswith("obs-fold") and len(statuses) > 1
        if first not in allowed or bad5xx or smuggled:
            with lock:
                fails.append("%s: got %s (all %s)%s, allowed %s" % (name, first, statuses,
                             " error %s" % err if err else "", sorted(allowed, key=str)))
    if not pipelined(port):
        with lock:
            fails.append("pipelining: 50 requests did not get 50 in-order answers")
    if not healthy(port):
        with lock:
            fails.append("/healthz did not answer 200 after the probes")


def proc_stat(pid):
    try:
        fds = len(__import__("os").listdir("/proc/%d/fd" % pid))
        rss = 0
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
        return fds, rss
    except OSError:
        return None, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, default=0, help="daemon pid, for the soak's fd/RSS check")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=0, help="soak: repeat rounds for this long")
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    fails, lock = [], threading.Lock()
    rounds = [0]
    t_end = time.monotonic() + a.seconds

    def worker():
        while True:
            with lock:
                if rounds[0] >= a.rounds and time.monotonic() >= t_end:
                    return
                if len(fails) > 20:
                    return
                rounds[0] += 1
            run_round(a.port, fails, lock)

    # warm-up round for the fd/RSS baseline
    run_round(a.port, fails, lock)
    fd0, rss0 = proc_stat(a.pid) if a.pid else (None, None)
    ths = [threading.Thread(target=worker) for _ in range(a.workers)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    if a.pid and fd0 is not None:
        time.sleep(1.0)
        fd1, rss1 = proc_stat(a.pid)
        print("hostile: %d rounds; daemon fds %s -> %s, RSS %s -> %s kB" % (rounds[0] + 1, fd0, fd1, rss0, rss1))
        if fd1 is None:
            fails.append("the daemon is gone")
        elif fd1 > fd0 + 8:
            fails.append("open files grew from %d to %d" % (fd0, fd1))
        elif a.seconds > 0 and rss1 > 2 * rss0 + 20000:
            fails.append("RSS grew from %d to %d kB" % (rss0, rss1))
    for f in fails:
        print("  FAIL: hostile: " + f)
    n = (rounds[0] + 1) * (len(PROBES) + 2)
    print("hostile: %d passed, %d failed" % (n - len(fails), len(fails)))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
