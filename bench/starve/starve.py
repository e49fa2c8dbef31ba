#!/usr/bin/env python3
"""bench/starve/starve.py: /healthz latency of a running dpsilod while heavy work runs (issue 10).

Usage: starve.py URL SCENARIO [options]; run.sh starts the daemons and calls it. Scenarios:
  idle        nothing else runs
  estimators  two worst-case estimator requests (the D4 body: 25,000 clients, components 64,
              n_init 100, max_iter 100000) sent at once
  pld         four clients charge one PLD silo whose log holds --pld-events distinct events
  slow        --slow-conns connections that send one header byte every 10 s
Every loop is bounded in count and time. Prints one line: scenario, samples, failures, p50, p99, max
(milliseconds), plus what the background load saw.
"""
import http.client
import json
import resource
import socket
import sys
import threading
import time
import urllib.parse

def healthz_ms(host, port, timeout):
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection(host, port, timeout=timeout)
        c.request("GET", "/healthz")
        r = c.getresponse()
        r.read()
        c.close()
        ok = r.status == 200
    except Exception:
        ok = False
    return (time.monotonic() - t0) * 1000.0, ok

def post(host, port, path, body, timeout, headers=None):
    t0 = time.monotonic()
    try:
        c = http.client.HTTPConnection(host, port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        c.request("POST", path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data, time.monotonic() - t0
    except Exception as e:
        return "error:%s" % type(e).__name__, b"", time.monotonic() - t0

def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]

def sample(host, port, seconds, interval, stop):
    lat, fails = [], 0
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end and n < 10000 and not stop.is_set():
        ms, ok = healthz_ms(host, port, 5.0)
        n += 1
        if ok:
            lat.append(ms)
        else:
            fails += 1
        time.sleep(interval)
    return lat, fails

def main():
    url, scenario = sys.argv[1], sys.argv[2]
    opts = dict(a.split("=", 1) for a in sys.argv[3:])
    seconds = float(opts.get("seconds", "15"))
    u = urllib.parse.urlparse(url)
    host, port = u.hostname, u.port
    stop = threading.Event()
    notes = []
    threads = []
    if scenario == "estimators":
        body = json.dumps({"clients": [{"mean": (i % 997) / 997.0, "n": 5} for i in range(25000)],
                           "noise_variance": 1, "components": 64, "n_init": 100,
                           "max_iter": 100000}).encode()
        res = []
        def one():
            res.append(post(host, port, "/v1/estimators/mixture", body, seconds + 5))
        for _ in range(2):
            t = threading.Thread(target=one, daemon=True)
            t.start()
            threads.append(t)
        time.sleep(0.2)
        lat, fails = sample(host, port, seconds, 0.05, stop)
        for t in threads:
            t.join(timeout=1)
        notes.append("body %d bytes; answers %s" % (len(body), ", ".join(
            "%s in %.2f s" % (r[0], r[2]) for r in res) or "none yet (still running)"))
    elif scenario == "pld":
        events = int(opts.get("pld_events", "200"))
        st, data, _ = post(host, port, "/v1/silos", json.dumps(
            {"name": "pld-bench", "budget": {"epsilon": 1e6, "delta": 1e-5, "accountant": "pld"}}), 30)
        silo = json.loads(data)["id"]
        # the log: `events` distinct sampled-Gaussian mechanisms in one composed charge
        ev = {"type": "composed", "events": [
            {"type": "poisson_sampled", "sampling_rate": 0.001 + 0.0001 * i,
             "event": {"type": "gaussian", "noise_multiplier": 1.0 + 0.001 * i}} for i in range(events)]}
        st, data, dt = post(host, port, "/v1/silos/%d/charges" % silo, json.dumps({"event": ev}), 600)
        notes.append("prefill of %d distinct events: %s in %.2f s" % (events, st, dt))
        counts = {"ok": 0, "other": 0}
        lock = threading.Lock()
        def charger(k):
            i = 0
            while not stop.is_set() and i < 1000:
                e = {"type": "poisson_sampled", "sampling_rate": 0.002 + 0.00001 * (k * 1000 + i),
                     "event": {"type": "gaussian", "noise_multiplier": 1.5}}
                st2, _, _ = post(host, port, "/v1/silos/%d/charges" % silo, json.dumps({"event": e}), 60)
                with lock:
                    counts["ok" if st2 == 201 else "other"] += 1
                i += 1
        for k in range(4):
            t = threading.Thread(target=charger, args=(k,), daemon=True)
            t.start()
            threads.append(t)
        time.sleep(0.2)
        lat, fails = sample(host, port, seconds, 0.05, stop)
        stop.set()
        for t in threads:
            t.join(timeout=65)
        notes.append("charges during the window: %d answered 201, %d other" % (counts["ok"], counts["other"]))
    elif scenario == "slow":
        n = int(opts.get("slow_conns", "1100"))
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = min(hard, n + 256)
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        # The attackers come from other loopback addresses than the prober (127.0.0.1), 200 per
        # address, so that the per-address limit does not hide the header deadline; a connection the
        # server closes is opened again at once, so n stay open (or pending) all the time.
        def attacker(i):
            src = "127.0.0.%d" % (2 + i // 200)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(2)
            s.bind((src, 0))
            s.connect((host, port))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            return s
        socks = []
        for i in range(n):
            try:
                socks.append(attacker(i))
            except Exception:
                socks.append(None)
        opened = [sum(1 for s in socks if s is not None)]
        notes.append("%d of %d slow connections open" % (opened[0], n))
        reopened = [0]
        def trickle():
            j = 0
            while not stop.is_set() and j < 1000:
                stop.wait(1)
                for i, s in enumerate(socks):
                    try:
                        if s is None:
                            raise OSError
                        s.sendall(b"a")
                    except Exception:
                        try:
                            if s is not None:
                                s.close()
                            socks[i] = attacker(i)
                            reopened[0] += 1
                        except Exception:
                            socks[i] = None
                j += 1
        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        lat, fails = sample(host, port, seconds, 0.05, stop)
        stop.set()
        notes.append("%d reconnections after the server closed one" % reopened[0])
        for s in socks:
            if s is not None:
                s.close()
    elif scenario == "jobs":
        # two training jobs at once (--job-workers 2): a private MLP on a synthetic classification
        # federation, long enough to outlast the sampling
        spec = {"algorithm": "fedavg", "model": {"type": "mlp", "hidden": [256]},
                "dataset": {"generator": "synthetic-classification", "silos": 4, "dim": 784,
                            "n_min": 3000, "n_max": 3000, "classes": 10},
                "rounds": 100000, "batch_size": 64, "lr": 0.05,
                "privacy": {"noise_multiplier": 1.0, "delta": 1e-5, "clip": 1}}
        ids = []
        for k in range(2):
            spec["seed"] = k
            st, data, _ = post(host, port, "/v1/jobs", json.dumps(spec), 60)
            ids.append(json.loads(data).get("id") if st == 202 else None)
        time.sleep(1.0)
        lat, fails = sample(host, port, seconds, 0.05, stop)
        done = []
        for i in ids:
            if i is not None:
                st, data, _ = post(host, port, "/v1/jobs/%d/cancel" % i, "{}", 30)
                try:
                    done.append(json.loads(data).get("rounds_done"))
                except Exception:
                    done.append(None)
        notes.append("jobs %s; rounds done while sampled: %s" % (ids, done))
    else:
        lat, fails = sample(host, port, seconds, 0.05, stop)
    print("%-11s samples %4d  failed %4d  p50 %8.1f ms  p99 %8.1f ms  max %8.1f ms  %s" % (
        scenario, len(lat) + fails, fails, pct(lat, 50), pct(lat, 99), max(lat) if lat else float("nan"),
        "; ".join(notes)))
    sys.stdout.flush()

if __name__ == "__main__":
    main()
