#!/usr/bin/env bash
# A stop that drains (issue #10, D1 and D6):
#   (a) SIGTERM under load never aborts the daemon. The timing shim below (LD_PRELOAD) delays the
#       main thread's epoll_ctl(EPOLL_CTL_DEL) of a listening socket, which widened the race of
#       MHD_quiesce_daemon against MHD's workers until nearly every stop aborted (exit 134). The
#       daemon no longer gives MHD a listening socket, so no stop may abort.
#       STOP_ROUNDS stops (10 here; `make soak` runs 100).
#   (b) after SIGTERM, a new request on a kept-alive connection gets 503 "shutting_down" with
#       Connection: close and Retry-After, while a request in flight completes;
#   (c) --drain-timeout bounds the stop when a request never finishes (a body that never comes);
#   (d) a second SIGTERM during the drain exits at once (status 3).
. "$(dirname "$0")/lib.sh"
STOP_ROUNDS=${STOP_ROUNDS:-10}
PY=python3

# ---- (a) shimmed stops under load ----
cat >"$T/epshim.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
/* Delays only the MAIN thread's epoll_ctl(EPOLL_CTL_DEL) of a LISTENING socket by SHIM_DELAY_NS
 * (default 200 us); counts such calls in the file SHIM_COUNT when set. */
int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    static int (*real)(int, int, int, struct epoll_event *);
    if (!real)
        real = (int (*)(int, int, int, struct epoll_event *))dlsym(RTLD_NEXT, "epoll_ctl");
    int acc = 0;
    socklen_t l = sizeof acc;
    if (op == EPOLL_CTL_DEL && syscall(SYS_gettid) == getpid() &&
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) == 0 && acc) {
        const char *d = getenv("SHIM_DELAY_NS");
        struct timespec ts = {0, d ? atol(d) : 200000};
        nanosleep(&ts, NULL);
    }
    return real(epfd, op, fd, ev);
}
C
if ! cc -O2 -shared -fPIC -o "$T/epshim.so" "$T/epshim.c" -ldl 2>"$T/cc.err"; then
    fail "cannot build the timing shim: $(head -3 "$T/cc.err")"
else
    : >"$T/load.cfg"
    for i in $(seq 1 400); do
        [ "$i" -gt 1 ] && echo next >>"$T/load.cfg"
        if [ $((i % 2)) -eq 0 ]; then
            printf 'url = "URL/healthz"\noutput = "/dev/null"\n' >>"$T/load.cfg"
        else
            printf 'url = "URL/v1/echo"\nrequest = "POST"\nheader = "Content-Type: application/json"\ndata = "{\\"message\\": \\"m\\"}"\noutput = "/dev/null"\n' >>"$T/load.cfg"
        fi
    done
    aborts=0
    others=0
    rounds=0
    for r in $(seq 1 "$STOP_ROUNDS"); do
        rm -rf "$T/db" "$T/db-wal" "$T/db-shm"
        # (an ASan build insists on coming first in the preload list unless told otherwise)
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
            LD_PRELOAD="$T/epshim.so" start_daemon --auth off --threads 4 || break
        sed "s#URL#$URL#" "$T/load.cfg" >"$T/load.$r.cfg"
        # a bounded load loop: at most 5 s, 400 requests per pass on 16 connections
        (end=$((SECONDS + 5)); while [ "$SECONDS" -lt "$end" ]; do
            curl -s -Z --parallel-max 16 -K "$T/load.$r.cfg" >/dev/null 2>&1 || break
        done) &
        LOAD_PID=$!
        sleep 0.3
        rc=0
        stop_daemon || rc=$?
        kill "$LOAD_PID" 2>/dev/null
        wait "$LOAD_PID" 2>/dev/null
        if [ "$rc" -eq 134 ]; then aborts=$((aborts + 1)); elif [ "$rc" -ne 0 ]; then others=$((others + 1)); fi
        rounds=$((rounds + 1))
    done
    check "all $STOP_ROUNDS shimmed daemons started and were stopped" test "$rounds" -eq "$STOP_ROUNDS"
    check "$STOP_ROUNDS shimmed SIGTERM stops under load: none aborted (exit 134)" test "$aborts" -eq 0
    check "$STOP_ROUNDS shimmed SIGTERM stops under load: all exited 0" test "$others" -eq 0
    served=$(grep -c 'POST /v1/echo 200 ' "$T/err")
    check "the stops came under load ($served echo requests served)" test "$served" -ge "$STOP_ROUNDS"
    check "no libmicrohttpd panic in the log" test -z "$(grep 'Fatal error in GNU libmicrohttpd' "$T/err")"
fi

# ---- (b) new request on a kept-alive connection during the drain: 503; in-flight completes ----
: >"$T/err"
start_daemon --auth off --drain-timeout 30 || exit 1
PORT=${URL##*:}
$PY - "$PORT" "$DAEMON_PID" >"$T/b.out" 2>&1 <<'PY'
import json, os, signal, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])

def read_response(s):
    """Reads one HTTP/1.1 response with a Content-Length; returns (status, headers, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        c = s.recv(65536)
        if not c:
            raise EOFError("closed before a response: %r" % buf)
        buf += c
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hdr = {}
    for l in lines[1:]:
        k, v = l.split(":", 1)
        hdr[k.strip().lower()] = v.strip()
    n = int(hdr.get("content-length", "0"))
    while len(rest) < n:
        c = s.recv(65536)
        if not c:
            break
        rest += c
    return status, hdr, rest[:n]

# a kept-alive connection: one request answered 200
ka = socket.create_connection(("127.0.0.1", port), timeout=10)
ka.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
st, h, _ = read_response(ka)
print("keepalive-first", st, h.get("connection", "-"))
# a request in flight: headers and half of the body
body = json.dumps({"message": "slow"}).encode()
fl = socket.create_connection(("127.0.0.1", port), timeout=10)
fl.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:5])
time.sleep(0.5)
os.kill(pid, signal.SIGTERM)
time.sleep(0.5)
# a new request on the kept-alive connection
ka.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
st, h, b = read_response(ka)
e = json.loads(b)["error"]
print("keepalive-during-drain", st, h.get("connection", "-"), h.get("retry-after", "-"), e["code"],
      "rid" if e.get("request_id") and e["request_id"] == h.get("x-request-id") else "norid")
try:
    closed = ka.recv(100) == b""
except OSError:
    closed = True
print("keepalive-closed", closed)
# a new connection is refused
try:
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    print("new-connection accepted")
except OSError:
    print("new-connection refused")
# the request in flight completes
fl.sendall(body[5:])
st, h, b = read_response(fl)
print("inflight", st, json.loads(b).get("message"))
PY
cat "$T/b.out" | sed 's/^/    /'
check "(b) a kept-alive connection works before the stop" grep -q '^keepalive-first 200' "$T/b.out"
check "(b) a new request during the drain gets 503 shutting_down, Connection: close, Retry-After, request id" \
    grep -q '^keepalive-during-drain 503 close 1 shutting_down rid$' "$T/b.out"
check "(b) the connection is closed after the 503" grep -q '^keepalive-closed True' "$T/b.out"
check "(b) new connections are refused during the drain" grep -q '^new-connection refused' "$T/b.out"
check "(b) the request in flight completes with 200" grep -q '^inflight 200 slow$' "$T/b.out"
rc=0
wait "$DAEMON_PID" || rc=$?
DAEMON_PID=""
check "(b) the drained daemon exits 0" test "$rc" -eq 0
check "(b) the 503 is in the access log" grep -q 'GET /healthz 503 ' "$T/err"
check "(b) stopped cleanly" grep -q 'stopped cleanly' "$T/err"

# ---- (c) --drain-timeout bounds the stop: a body that never arrives ----
: >"$T/err"
start_daemon --auth off --drain-timeout 1 || exit 1
PORT=${URL##*:}
$PY - "$PORT" >"$T/c.out" 2>&1 <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=60)
s.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
print("sent", flush=True)
try:
    print("got", s.recv(100), flush=True)   # the daemon closes it at the drain timeout
except OSError as e:
    print("error", e, flush=True)
PY
HOLD_PID=$!
for _ in $(seq 1 100); do grep -q sent "$T/c.out" 2>/dev/null && break; sleep 0.05; done
sleep 0.3
kill -TERM "$DAEMON_PID"
exited=0
for _ in $(seq 1 200); do # 20 s, far more than the 1 s drain and far less than the client's 60 s
    if ! kill -0 "$DAEMON_PID" 2>/dev/null; then exited=1; break; fi
    sleep 0.1
done
rc=0
if [ "$exited" = 1 ]; then wait "$DAEMON_PID" || rc=$?; fi
check "(c) a request that never finishes does not hold the stop past --drain-timeout" test "$exited" -eq 1
check "(c) the daemon exits 0 after the drain timeout" test "$rc" -eq 0
check "(c) the log says a request was cut off" grep -q 'still in flight after the drain timeout' "$T/err"
[ "$exited" = 1 ] && DAEMON_PID=""
kill "$HOLD_PID" 2>/dev/null
wait "$HOLD_PID" 2>/dev/null

# ---- (d) a second SIGTERM exits at once ----
: >"$T/err"
start_daemon --auth off --drain-timeout 600 || exit 1
PORT=${URL##*:}
$PY - "$PORT" >"$T/d.out" 2>&1 <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=60)
s.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
print("sent", flush=True)
try:
    s.recv(100)
except OSError:
    pass
PY
HOLD_PID=$!
for _ in $(seq 1 100); do grep -q sent "$T/d.out" 2>/dev/null && break; sleep 0.05; done
sleep 0.3
kill -TERM "$DAEMON_PID"
sleep 0.5
check "(d) the first SIGTERM drains (the daemon waits for the request in flight)" kill -0 "$DAEMON_PID"
kill -TERM "$DAEMON_PID"
exited=0
for _ in $(seq 1 100); do
    if ! kill -0 "$DAEMON_PID" 2>/dev/null; then exited=1; break; fi
    sleep 0.1
done
rc=0
if [ "$exited" = 1 ]; then wait "$DAEMON_PID" || rc=$?; DAEMON_PID=""; fi
check "(d) a second SIGTERM exits at once, long before the 600 s drain timeout" test "$exited" -eq 1
check "(d) with status 3" test "$rc" -eq 3
check "(d) the log says why" grep -q 'during the drain: exiting now' "$T/err"
kill "$HOLD_PID" 2>/dev/null
wait "$HOLD_PID" 2>/dev/null

# Nothing acknowledged is lost by a second signal: charges acknowledged before it are all there.
start_daemon --auth off --drain-timeout 600 || exit 1
expect_status 201 POST /v1/silos '{"name":"second-signal","budget":{"rho":100}}'
S=$(printf '%s' "$BODY" | jq -r .id)
: >"$T/charge.cfg"
for i in $(seq 1 300); do
    [ "$i" -gt 1 ] && echo next >>"$T/charge.cfg"
    printf 'url = "%s/v1/silos/%s/charges?k=k%d"\nrequest = "POST"\nheader = "Content-Type: application/json"\ndata = "{\\"event\\":{\\"type\\":\\"zcdp\\",\\"rho\\":0.001},\\"idempotency_key\\":\\"k%d\\"}"\noutput = "/dev/null"\nwrite-out = "%%{http_code} %%{url}\\n"\n' "$URL" "$S" "$i" "$i" >>"$T/charge.cfg"
done
curl -s -Z --parallel-max 16 -K "$T/charge.cfg" >"$T/charge.ack" 2>/dev/null &
CURL_PID=$!
for _ in $(seq 1 200); do [ -s "$T/charge.ack" ] && break; sleep 0.01; done
kill -TERM "$DAEMON_PID"
kill -TERM "$DAEMON_PID"
rc=0
wait "$DAEMON_PID" || rc=$?
DAEMON_PID=""
wait "$CURL_PID"
check "two quick SIGTERMs during a charge storm: exit 0 (drained) or 3 (forced), never a crash" \
    test "$rc" -eq 0 -o "$rc" -eq 3
grep '^201 ' "$T/charge.ack" | sed 's/.*?k=//' | sort >"$T/acked"
start_daemon --auth off || exit 1
req GET "/v1/silos/$S/charges?limit=1000"
printf '%s' "$BODY" | jq -r '.charges[].idempotency_key' | sort >"$T/logged"
echo "  $(wc -l <"$T/acked") charges acknowledged before the forced stop"
check "every acknowledged charge is in the log after a forced stop" \
    test "$(comm -23 "$T/acked" "$T/logged" | wc -l)" -eq 0
check "daemon stops cleanly" stop_daemon
finish
