#!/usr/bin/env bash
# A token is checked before the body is read (docs/API.md "Authentication"): with auth on, a 20 MB
# body sent without a token, or with an unknown one, to an estimator route of a daemon that accepts
# 64 MB bodies is answered 401 from its headers alone; the daemon never stores the body, so its peak
# memory (VmHWM) stays far below what reading and parsing it would take. Memory, never time.
. "$(dirname "$0")/lib.sh"
start_daemon --max-body 67108864 || exit 1
PORT=${URL##*:}
hwm() { awk '/^VmHWM:/ {print $2}' "/proc/$DAEMON_PID/status"; }
echo "    VmHWM at start: $(hwm) kB"
send_big() { # $1 = Authorization header line or ""
    python3 - "$PORT" "$1" <<'PY'
import re, select, socket, sys
port, auth = int(sys.argv[1]), sys.argv[2].encode()
n = 20 * 1024 * 1024
body = b'{"x":"' + b"a" * (n - 8) + b'"}'
s = socket.create_connection(("127.0.0.1", port), timeout=10)
head = (b"POST /v1/estimators/gaussian HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + (auth + b"\r\n" if auth else b"") + b"Content-Length: %d\r\n\r\n" % len(body))
s.sendall(head)
sent = 0
try:
    while sent < len(body):  # stop sending as soon as an answer is there
        if select.select([s], [], [], 0)[0]:
            break
        sent += s.send(body[sent:sent + 1048576])
except OSError:
    pass
out = b""
try:
    while True:
        c = s.recv(65536)
        if not c:
            break
        out += c
except OSError:
    pass
m = re.match(rb"HTTP/1\.1 (\d+)", out)
print(m.group(1).decode() if m else "none", b"unauthenticated" in out)
PY
}
r1=$(send_big "")
r2=$(send_big "Authorization: Bearer not-a-real-token-0123456789")
echo "    no token: $r1; unknown token: $r2; VmHWM after: $(hwm) kB"
check "20 MB body without a token: 401 unauthenticated" test "$r1" = "401 True"
check "20 MB body with an unknown token: 401 unauthenticated" test "$r2" = "401 True"
check "the daemon's peak memory stays under 60 MB (the bodies were not stored)" test "$(hwm)" -lt 61440
AUTH="" expect_status 401 POST /v1/estimators/gaussian '{}'
expect_status 400 POST /v1/estimators/gaussian '{}' # the admin token still gets through
# A large body that is let in (>= 8 MB, common/dp_huge.h): held at once from its Content-Length,
# on huge pages where the kernel allows, and read whole.
python3 - "$T/big.json" <<'PY'
import json, sys
n = 360000
json.dump({"clients": [{"mean": (i % 997) / 997.0, "n": 5} for i in range(n)],
           "noise_variance": 1, "results": "summary"}, open(sys.argv[1], "w"))
PY
check "the accepted body is over 8 MB" test "$(stat -c %s "$T/big.json")" -gt 8388608
OPENAPI_CHECK=0 expect_status 201 POST /v1/estimators/gaussian "@$T/big.json"
expect_json .results summary
expect_json '.prior.mean | . > 0.49 and . < 0.51' true
check "daemon stops cleanly" stop_daemon
finish
