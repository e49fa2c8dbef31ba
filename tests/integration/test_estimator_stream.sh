#!/usr/bin/env bash
# An estimator answer that holds every client's row is written while it is sent (issue 15, "fast
# end to end": the ~100 MB answer of 10^6 clients is never held whole), with raw sockets:
#   - HTTP/1.1: Transfer-Encoding: chunked, no Content-Length, and the chunks decode to the JSON
#     that curl reads (every row, run_id last), on a connection that stays open for a second
#     request;
#   - HTTP/1.0 (no chunked encoding): the same bytes, ended by closing the connection;
#   - a client that reads a few bytes and hangs up, many times over: the daemon keeps answering
#     (what the writer held is released: `make asan` runs this script under LeakSanitizer);
#   - an answer without rows ("results": "summary") keeps its Content-Length.
. "$(dirname "$0")/lib.sh"
start_daemon --auth off --max-body 8388608 || exit 1
PORT=${URL##*:}
python3 -c "import json; print(json.dumps({'noise_variance': 1, 'clients': [{'id': 'c%d' % i, 'mean': (i % 97) / 97.0, 'n': 1 + i % 5} for i in range(20000)]}))" >"$T/body.json"
curl -s -o "$T/curl.json" -X POST --data-binary "@$T/body.json" "$URL/v1/estimators/gaussian"
check "curl reads every row" [ "$(jq '.estimates | length' "$T/curl.json")" = 20000 ]

python3 - "$PORT" "$T/body.json" "$T/curl.json" >"$T/s.out" 2>&1 <<'PY'
import json, re, socket, sys
port, body, ref = int(sys.argv[1]), open(sys.argv[2], "rb").read(), json.load(open(sys.argv[3]))
ok = True

def say(good, what):
    global ok
    print(("ok:   " if good else "FAIL: ") + what)
    ok = ok and good

def request(version, path="/v1/estimators/gaussian", data=body):
    return (b"POST %s HTTP/%s\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), version, len(data))) + data

def read_head(s, buf):
    while b"\r\n\r\n" not in buf:
        more = s.recv(65536)
        if not more:
            raise EOFError("closed before the header block ended")
        buf += more
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest

def recv(s):
    more = s.recv(65536)
    if not more:
        raise EOFError("the connection closed in the middle of the answer")
    return more

def read_chunked(s, buf):
    out = b""
    while True:
        while b"\r\n" not in buf:
            buf += recv(s)
        line, buf = buf.split(b"\r\n", 1)
        n = int(line.split(b";")[0], 16)
        while len(buf) < n + 2:
            buf += recv(s)
        if n == 0:
            return out, buf[2:]
        out, buf = out + buf[:n], buf[n + 2:]

# HTTP/1.1: chunked, then a second request on the same connection
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(request(b"1.1"))
head, rest = read_head(s, b"")
say(head.startswith("HTTP/1.1 201"), "HTTP/1.1: 201 (%s)" % head.split("\r\n")[0])
say(re.search(r"(?im)^transfer-encoding: *chunked", head) is not None, "HTTP/1.1: chunked")
say(re.search(r"(?im)^content-length:", head) is None, "HTTP/1.1: no Content-Length")
say(re.search(r"(?im)^location: */v1/runs/\d+", head) is not None, "HTTP/1.1: Location")
text, rest = read_chunked(s, rest)
a = json.loads(text)
say(len(a["estimates"]) == 20000, "HTTP/1.1: every row")
say(a["estimates"] == ref["estimates"], "HTTP/1.1: the rows curl read")
say(list(a)[-1] == "run_id" and a["run_id"] == ref["run_id"] + 1, "HTTP/1.1: run_id last, the next run")
say({k: v for k, v in a.items() if k not in ("run_id",)} ==
    {k: v for k, v in ref.items() if k not in ("run_id",)}, "HTTP/1.1: the answer curl read")
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
head, rest = read_head(s, rest)
say(head.startswith("HTTP/1.1 200"), "the connection serves a second request")
s.close()

# HTTP/1.0: no chunks, the end is the connection's close
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(request(b"1.0"))
head, rest = read_head(s, b"")
say(head.startswith("HTTP/1.") and " 201" in head.split("\r\n")[0], "HTTP/1.0: 201")
say(re.search(r"(?im)^transfer-encoding: *chunked", head) is None, "HTTP/1.0: not chunked")
while True:
    more = s.recv(1 << 20)
    if not more:
        break
    rest += more
a = json.loads(rest)
say(a["estimates"] == ref["estimates"], "HTTP/1.0: the same rows, ended by the close")
s.close()

# hanging up mid-answer (what the writer held is released: LeakSanitizer under make asan); then
# the daemon still answers in full
for i in range(25):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(request(b"1.1"))
    head, rest = read_head(s, b"")
    s.recv(1000)
    s.close()
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(request(b"1.1"))
head, rest = read_head(s, b"")
text, rest = read_chunked(s, rest)
say(json.loads(text)["estimates"] == ref["estimates"], "after 25 clients hung up mid-answer, a full answer")
s.close()

# the fit alone: a plain answer with its length
summ = json.dumps(dict(json.loads(body), results="summary")).encode()
s = socket.create_connection(("127.0.0.1", port), timeout=30)
s.sendall(request(b"1.1", data=summ))
head, rest = read_head(s, b"")
m = re.search(r"(?im)^content-length: *(\d+)", head)
say(m is not None, "summary: Content-Length")
while m and len(rest) < int(m.group(1)):
    rest += recv(s)
say(m is not None and "estimates" not in json.loads(rest), "summary: the fit alone")
s.close()
sys.exit(0 if ok else 1)
PY
rc=$?
sed 's/^/  /' "$T/s.out"
check "the raw-socket checks pass" [ "$rc" = 0 ]
expect_status 200 GET /healthz
expect_status 201 POST /v1/estimators/gaussian "$(jq -c '.clients |= .[:50]' "$T/body.json")"
expect_json '.estimates | length' 50
finish
