#!/usr/bin/env bash
# Slow clients cannot lock others out (issue #10, D5: 1,100 connections trickling header
# bytes held every connection slot, and every legitimate request timed out):
#   - SLOW_CONNS connections (200 here; `make soak` runs 1,100) from other loopback addresses
#     (127.0.0.2, 127.0.0.3, ...) trickle header bytes; /healthz from 127.0.0.1 still answers;
#   - one connection more than --max-conns-per-ip from one address gets 503 JSON and is closed;
#   - a connection still sending headers at --header-timeout gets 408 JSON (request id, access-log
#     line) and is closed; a kept-alive connection trickling its next request is closed too;
#   - a body still incomplete at --body-timeout gets the connection closed;
#   - the attackers' closes do not write a warning line each.
. "$(dirname "$0")/lib.sh"
SLOW_CONNS=${SLOW_CONNS:-200}
PER_IP=100
ulimit -n "$(ulimit -Hn)" 2>/dev/null # the client side holds SLOW_CONNS sockets

start_daemon --auth off --header-timeout 2 --body-timeout 2 --max-conns-per-ip "$PER_IP" || exit 1
PORT=${URL##*:}
python3 - "$PORT" "$SLOW_CONNS" "$PER_IP" >"$T/slow.out" 2>&1 <<'PY'
import json, socket, sys, time
port, n, per_ip = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

def connect(src, timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s

def response(s):
    """Everything until the server closes (or a 10 s silence)."""
    out = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
    except OSError:
        pass
    return out

def parse(raw):
    if not raw:
        return None, {}, None
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    hdr = {}
    for l in lines[1:]:
        if ":" in l:
            k, v = l.split(":", 1)
            hdr[k.strip().lower()] = v.strip()
    try:
        body = json.loads(body)
    except ValueError:
        body = None
    return int(lines[0].split()[1]), hdr, body

def healthz():
    s = connect("127.0.0.1", timeout=5)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        st, _, _ = parse(response(s))
        return st
    finally:
        s.close()

# the attackers: per_ip connections from each of 127.0.0.2, 127.0.0.3, ...
slow = []
for i in range(n):
    src = "127.0.0.%d" % (2 + i // per_ip)
    s = connect(src)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    slow.append(s)
print("attackers", len(slow), "from", (n - 1) // per_ip + 1, "addresses", flush=True)
for round_ in range(3):
    for s in slow:
        s.sendall(b"a")
    print("healthz", healthz(), flush=True)
    time.sleep(0.3)

# one more from an address at its limit: 503 JSON, closed
extra = connect("127.0.0.2")
st, hdr, body = parse(response(extra))
print("over-limit", st, hdr.get("connection"), hdr.get("retry-after"),
      body["error"]["code"] if body else None,
      "rid" if body and body["error"]["request_id"] == hdr.get("x-request-id") else "norid", flush=True)

# the attackers' header deadline passes: each gets 408 JSON and is closed
got = {}
for s in slow:
    st, hdr, body = parse(response(s))
    key = (st, body["error"]["code"] if body else None, hdr.get("connection"))
    got[key] = got.get(key, 0) + 1
print("attackers-ended", sorted((k[0] or 0, k[1] or "-", k[2] or "-", v) for k, v in got.items()), flush=True)
for s in slow:
    s.close()

# a trickler that keeps sending stays bounded by the deadline too
t = connect("127.0.0.4", timeout=15)
t.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\n")
t0 = time.time()
st = None
while time.time() - t0 < 12:
    try:
        t.sendall(b"X-A: b\r\n")
    except OSError:
        break
    time.sleep(0.2)
    t.setblocking(False)
    try:
        raw = t.recv(65536)
    except BlockingIOError:
        raw = None
    t.setblocking(True)
    if raw is not None:
        raw += response(t)
        st, hdr, body = parse(raw)
        break
print("trickler", st, body["error"]["code"] if body else None,
      (body["error"]["message"] if body else "").replace(" ", "_"), flush=True)
t.close()

# the addresses' counts were released: a new connection from 127.0.0.2 is served
s = connect("127.0.0.2")
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
print("after-release", parse(response(s))[0], flush=True)
s.close()

# a kept-alive connection cannot dodge the header deadline: one quick request, then the next
# request's headers trickle; the connection is closed once --header-timeout has passed
k = connect("127.0.0.6", timeout=15)
k.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    buf += k.recv(65536)
first = parse(buf)[0]
k.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
t0 = time.time()
closed = False
while time.time() - t0 < 12:
    try:
        k.sendall(b"X-A: b\r\n")
    except OSError:
        closed = True
        break
    k.setblocking(False)
    try:
        closed = k.recv(100) == b""
    except BlockingIOError:
        pass
    except OSError:
        closed = True
    k.setblocking(True)
    if closed:
        break
    time.sleep(0.2)
print("keepalive-trickler", first, "closed" if closed else "open", flush=True)
k.close()

# a body that does not arrive within --body-timeout: the connection is closed, no answer
b = connect("127.0.0.5", timeout=15)
b.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{")
t0 = time.time()
closed = False
while time.time() - t0 < 12:
    try:
        b.sendall(b" ")
    except OSError:
        closed = True
        break
    b.setblocking(False)
    try:
        closed = b.recv(100) == b""
    except BlockingIOError:
        pass
    except OSError:
        closed = True
    b.setblocking(True)
    if closed:
        break
    time.sleep(0.25)
print("slow-body-closed", closed, flush=True)
PY
sed 's/^/    /' "$T/slow.out"
check "$SLOW_CONNS slow connections were opened" grep -q "^attackers $SLOW_CONNS " "$T/slow.out"
check "/healthz from another address answers 200 while they trickle (3 of 3)" \
    test "$(grep -c '^healthz 200$' "$T/slow.out")" -eq 3
check "one connection over --max-conns-per-ip: 503 unavailable, Connection: close, Retry-After, request id" \
    grep -q '^over-limit 503 close 1 unavailable rid$' "$T/slow.out"
check "every slow connection gets 408 request_timeout and is closed at --header-timeout" \
    grep -q "^attackers-ended \[(408, 'request_timeout', 'close', $SLOW_CONNS)\]$" "$T/slow.out"
check "a trickler that keeps sending header lines gets 408 too" \
    grep -q '^trickler 408 request_timeout the_request_headers_did_not_arrive_within_2_s$' "$T/slow.out"
check "closed connections release their address's count" grep -q '^after-release 200$' "$T/slow.out"
check "a kept-alive connection trickling its next request's headers is closed too" \
    grep -q '^keepalive-trickler 200 closed$' "$T/slow.out"
check "a body not received within --body-timeout: the connection is closed" \
    grep -q '^slow-body-closed True$' "$T/slow.out"
check "408s are in the access log with the request line" grep -q ' GET /healthz 408 ' "$T/err"
check "the slow body's request is in the access log as 408" grep -q ' POST /v1/echo 408 ' "$T/err"
nwarn=$(grep -c ' WARN ' "$T/err")
check "no warning line per attacker ($nwarn warnings for $SLOW_CONNS attackers)" test "$nwarn" -lt 20
check "daemon stops cleanly" stop_daemon

# Slow BODIES cannot lock others out either: connections send complete headers to the open route
# POST /v1/accounting/epsilon with Content-Length: 100000, then half of them trickle one byte every
# 5 s and half send nothing. 300 from 127.0.0.2-3 here; with SLOW_CONNS >= 1000 (`make soak`),
# SLOW_CONNS from 127.0.0.2-6 (1,100 = 220 each was more than MHD's old cap of 1,024 connections:
# /healthz got 503 for as long as the bodies were allowed to last). Each body must reach
# --body-min-rate (1024 bytes/s) after the --body-timeout grace (2 s here), so all are dropped,
# the silent ones by the once-a-second tick; a body that keeps up the rate outlives the grace.
if [ "$SLOW_CONNS" -ge 1000 ]; then BODY_CONNS=$SLOW_CONNS BODY_ADDRS=5; else BODY_CONNS=300 BODY_ADDRS=2; fi
start_daemon --auth off --body-timeout 2 --max-conns-per-ip 256 || exit 1
PORT=${URL##*:}
python3 - "$PORT" "$BODY_CONNS" "$BODY_ADDRS" >"$T/body.out" 2>&1 <<'PY'
import socket, sys, time
port, n, addrs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
per = (n + addrs - 1) // addrs

def connect(src, timeout=10):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s

def healthz():
    s = connect("127.0.0.1", timeout=5)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        out = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
        return out.split(b" ", 2)[1].decode() if out else "none"
    except OSError:
        return "error"
    finally:
        s.close()

def is_closed(s):  # (no select: the descriptors may be above FD_SETSIZE)
    try:
        return s.recv(100, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True

head = (b"POST /v1/accounting/epsilon HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000\r\n\r\n")
slow = []
for i in range(n):
    s = connect("127.0.0.%d" % (2 + i // per))
    s.sendall(head + b"{")
    slow.append(s)
print("body-attackers", len(slow), "from", addrs, "addresses", flush=True)
for _ in range(3):
    print("body-healthz", healthz(), flush=True)
# a body that keeps up the rate (about 4000 bytes/s for 3 s, past the 2 s grace) is served
g = connect("127.0.0.7", timeout=15)
body = b'{"event":{"type":"gaussian","noise_multiplier":1},' + b" " * 12000 + b'"delta":1e-5}'
g.sendall(b"POST /v1/accounting/epsilon HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
t0 = time.time()
last_trickle = t0
open_ = set(range(n))
sent = 0
while sent < len(body):
    try:
        g.sendall(body[sent:sent + 1000])
    except OSError:
        break
    sent += 1000
    time.sleep(0.25)
    if time.time() - last_trickle >= 5:  # the trickling half: one byte every 5 s
        last_trickle = time.time()
        for i in list(open_):
            if i % 2 == 0:
                try:
                    slow[i].send(b" ")
                except OSError:
                    pass
    open_ = {i for i in open_ if not is_closed(slow[i])}
out = b""
try:
    while True:
        c = g.recv(65536)
        if not c:
            break
        out += c
except OSError:
    pass
print("steady-body", out.split(b" ", 2)[1].decode() if out else "none", "sent", sent, "bytes in",
      "%.1f s" % (time.time() - t0), flush=True)
# the slow ones: all dropped (bounded wait)
while open_ and time.time() - t0 < 20:
    time.sleep(0.5)
    open_ = {i for i in open_ if not is_closed(slow[i])}
print("body-attackers-open", len(open_), flush=True)
print("body-healthz-after", healthz(), flush=True)
for s in slow:
    s.close()
PY
sed 's/^/    /' "$T/body.out"
check "$BODY_CONNS slow-body connections were opened" grep -q "^body-attackers $BODY_CONNS " "$T/body.out"
check "/healthz from another address answers 200 while the bodies trickle (3 of 3)" \
    test "$(grep -c '^body-healthz 200$' "$T/body.out")" -eq 3
check "a body that keeps up --body-min-rate past the grace is answered 200" \
    grep -q '^steady-body 200 ' "$T/body.out"
check "every slow body's connection is dropped, the silent ones too" \
    grep -q '^body-attackers-open 0$' "$T/body.out"
check "/healthz answers 200 afterwards" grep -q '^body-healthz-after 200$' "$T/body.out"
check "the slow bodies are in the access log as 408" grep -q ' POST /v1/accounting/epsilon 408 ' "$T/err"
check "daemon stops cleanly" stop_daemon
finish
