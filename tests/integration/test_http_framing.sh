#!/usr/bin/env bash
# HTTP that says what it means (issue #10, D13 and D14), with raw sockets:
#   - differing Content-Length headers, Content-Length with Transfer-Encoding, and two
#     Authorization headers are 400 JSON with Connection: close, and the bytes after them are
#     never served as a second ("smuggled") request; on a connection's first request and on a
#     kept-alive one;
#   - what libmicrohttpd used to answer itself in HTML on a connection's first request (header
#     block or URL too long, a header line without a colon, HTTP/0.9, a Content-Length that is not
#     plain digits, HTTP/2 or another version, an unknown Transfer-Encoding) is now the documented
#     JSON error with a request id and an access-log line, sent once (MHD 0.9.75 doubled the
#     header block for a bad Content-Length).
. "$(dirname "$0")/lib.sh"
start_daemon --auth off || exit 1
PORT=${URL##*:}
python3 - "$PORT" >"$T/f.out" 2>&1 <<'PY'
import json, re, socket, sys
port = int(sys.argv[1])

def exchange(data, first=None):
    """Sends data (after `first`, a request answered on the same connection when given); returns
    every byte the server sends until it closes or is silent for 2 s."""
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    if first is not None:
        s.sendall(first)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += s.recv(65536)
        head, rest = buf.split(b"\r\n\r\n", 1)
        n = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
        while len(rest) < n:
            rest += s.recv(65536)
    s.sendall(data)
    out = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                out += b"<closed>"
                break
            out += c
    except socket.timeout:
        pass
    except OSError:
        out += b"<reset>"
    s.close()
    return out

def summary(name, out):
    statuses = re.findall(rb"HTTP/1\.[01] (\d{3})", out)
    m = re.search(rb"\r\n\r\n(\{.*?\})(?:HTTP/|<closed>|<reset>|$)", out, re.S)
    code, rid_ok = "-", "norid"
    if m:
        try:
            e = json.loads(m.group(1))["error"]
            code = e["code"]
            hid = re.search(rb"(?i)x-request-id: *([^\r]+)", out)
            rid_ok = "rid" if hid and e["request_id"] == hid.group(1).decode() else "norid"
        except (ValueError, KeyError):
            code = "notjson"
    ctype = re.search(rb"(?i)content-type: *([^\r;]+)", out)
    conn = re.search(rb"(?i)connection: *([^\r]+)", out)
    print(name, b",".join(statuses).decode() or "-", code, rid_ok,
          ctype.group(1).decode() if ctype else "-", conn.group(1).decode() if conn else "-",
          "closed" if out.endswith(b"<closed>") or out.endswith(b"<reset>") else "open", flush=True)

E = b'{"message":"hi"}'
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
KA = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
cl2 = b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\nContent-Length: 3\r\n\r\n" + E + SMUGGLED
clte = (b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"10\r\n" + E + b"\r\n0\r\n\r\n" + SMUGGLED)
auth2 = (b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer aaaaaaaaaaaaaaaa\r\n"
         b"Authorization: Bearer bbbbbbbbbbbbbbbb\r\nContent-Length: 16\r\n\r\n" + E)
same_cl = b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\nContent-Length: 16\r\nConnection: close\r\n\r\n" + E
# obs-fold (RFC 9112 5.2): MHD folds " 0" into the Content-Length value ("36 0")
fold_sp = b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n 0\r\n\r\n" % len(SMUGGLED) + SMUGGLED
fold_ht = b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\t0\r\n\r\n" % len(SMUGGLED) + SMUGGLED
fold_te = (b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n x\r\n\r\n"
           b"0\r\n\r\n" + SMUGGLED)
for name, data in (("cl-differ", cl2), ("cl-te", clte), ("auth-twice", auth2), ("fold-sp", fold_sp),
                   ("fold-ht", fold_ht), ("fold-te", fold_te)):
    summary(name, exchange(data))
    summary(name + "-keepalive", exchange(data, first=KA))
summary("cl-same", exchange(same_cl))

# errors MHD used to send as HTML, on a connection's first request
summary("header-too-large", exchange(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 20000 + b"\r\n\r\n"))
summary("url-too-long", exchange(b"GET /healthz?" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"))
summary("no-colon", exchange(b"GET /healthz HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n"))
summary("http09", exchange(b"GET /healthz\r\n\r\n"))
for v in (b"+16", b"-1", b"0x10", b"18446744073709551632"):
    summary("cl-" + v.decode(), exchange(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + v + b"\r\n\r\n" + E))
summary("http2", exchange(b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n"))
summary("http99", exchange(b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n"))
summary("h2-preface", exchange(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
summary("te-gzip", exchange(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" + E))
summary("te-chunked-ok", exchange(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n10\r\n" + E + b"\r\n0\r\n\r\n"))
summary("http10-ok", exchange(b"GET /healthz HTTP/1.0\r\n\r\n"))
# documented exception (docs/API.md): on a kept-alive connection MHD refuses this itself
summary("ka-bad-length", exchange(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: +16\r\n\r\n" + E, first=KA))
summary("leading-crlf-ok", exchange(b"\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
PY
sed 's/^/    /' "$T/f.out"
J=application/json
for n in cl-differ cl-te auth-twice fold-sp fold-ht fold-te; do
    for w in "" -keepalive; do
        want="^$n$w 400 invalid_argument rid $J close closed$" # (the keep-alive 200 is read first)
        check "$n$w: one 400 JSON, Connection: close, closed, nothing smuggled" grep -q "$want" "$T/f.out"
    done
done
check "equal duplicate Content-Length headers are accepted" grep -q '^cl-same 200 ' "$T/f.out"
check "20 kB header block: 431 JSON" grep -q "^header-too-large 431 header_fields_too_large rid $J close closed$" "$T/f.out"
check "20 kB URL: 414 JSON" grep -q "^url-too-long 414 uri_too_long rid $J close closed$" "$T/f.out"
check "header line without a colon: 400 JSON" grep -q "^no-colon 400 invalid_argument rid $J close closed$" "$T/f.out"
check "HTTP/0.9 request line: 400 JSON" grep -q "^http09 400 invalid_argument rid $J close closed$" "$T/f.out"
for v in +16 -1 0x10 18446744073709551632; do
    check "Content-Length $v: one 400 JSON (no doubled header block)" \
        grep -q "^cl-$v 400 invalid_argument rid $J close closed$" "$T/f.out"
done
for n in http2 http99 h2-preface; do
    check "$n: 505 JSON" grep -q "^$n 505 http_version_not_supported rid $J close closed$" "$T/f.out"
done
check "Transfer-Encoding gzip: 501 JSON" grep -q "^te-gzip 501 not_implemented rid $J close closed$" "$T/f.out"
check "Transfer-Encoding chunked still works" grep -q '^te-chunked-ok 200 ' "$T/f.out"
check "HTTP/1.0 still works" grep -q '^http10-ok 200 ' "$T/f.out"
check "a leading empty line is allowed" grep -q '^leading-crlf-ok 200 ' "$T/f.out"
check "kept-alive request refused by MHD itself: a 400 (HTML, documented)" grep -q '^ka-bad-length 400[, ]' "$T/f.out"
check "... and MHD's message is logged without a request id" \
    grep -q 'WARN \[[0-9a-f]*\] - microhttpd: .*400' "$T/err"
check "the acceptor's errors are in the access log" grep -q ' PRI \* 505 ' "$T/err"
check "the dispatcher's framing errors are in the access log" grep -q ' POST /v1/echo 400 ' "$T/err"
check "no smuggled request reached the dispatcher" test -z "$(grep '/smuggled' "$T/err")"
check "daemon stops cleanly" stop_daemon
finish
