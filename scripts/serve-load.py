#!/usr/bin/env python3
"""Load check of `diffnet serve` (docs/serve.md, "Under load"): slow clients and concurrent uploads.

    scripts/serve-load.py IMAGE [--port 8080] [--slow 20] [--concurrent 32]

Against a running server on 127.0.0.1:PORT it measures, and prints as JSON lines:
  1. idle: GET /health latency and one POST /predict of IMAGE;
  2. slow: SLOW clients that start a POST and then send one byte per second; meanwhile /health latency
     and one normal POST /predict (its status and latency);
  3. burst: CONCURRENT clients POST IMAGE at once: status counts, latencies of the 200s in completion
     order, and how fast the 503s came back.
Python standard library only.
"""
import argparse
import http.client
import json
import socket
import statistics
import threading
import time


def request(port, method, path, body=None, timeout=600):
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "image/jpeg"} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, time.monotonic() - t0, dict(resp.getheaders()), data


def health_ms(port, n=5):
    return statistics.median(request(port, "GET", "/health")[1] * 1e3 for _ in range(n))


def slow_client(port, stop, length):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode())
    try:
        while not stop.is_set():
            s.sendall(b"x")
            stop.wait(1.0)
    except OSError:
        pass  # dropped by the server: what should happen
    s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("image")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--slow", type=int, default=20)
    ap.add_argument("--concurrent", type=int, default=32)
    a = ap.parse_args()
    body = open(a.image, "rb").read()

    status, sec, _, _ = request(a.port, "POST", "/predict", body)
    print(json.dumps({"case": "idle", "health_ms": round(health_ms(a.port), 1), "predict_status": status,
                      "predict_s": round(sec, 2)}), flush=True)

    stop = threading.Event()
    slow = [threading.Thread(target=slow_client, args=(a.port, stop, 10**6)) for _ in range(a.slow)]
    for t in slow:
        t.start()
    time.sleep(2)
    h = health_ms(a.port)
    status, sec, _, _ = request(a.port, "POST", "/predict", body)
    stop.set()
    for t in slow:
        t.join()
    print(json.dumps({"case": f"{a.slow} slow clients", "health_ms": round(h, 1), "predict_status": status,
                      "predict_s": round(sec, 2)}), flush=True)

    results = [None] * a.concurrent
    def one(i):
        try:
            st, sec, headers, _ = request(a.port, "POST", "/predict", body)
            results[i] = (st, sec, headers.get("Retry-After"))
        except OSError as e:
            results[i] = (str(e), 0, None)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(a.concurrent)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = {}
    for st, _, _ in results:
        codes[str(st)] = codes.get(str(st), 0) + 1
    ok = sorted(sec for st, sec, _ in results if st == 200)
    busy = [sec for st, sec, _ in results if st == 503]
    print(json.dumps({"case": f"{a.concurrent} concurrent", "status": codes,
                      "ok_latency_s": [round(x, 2) for x in ok],
                      "busy_max_s": round(max(busy), 3) if busy else None,
                      "retry_after": sorted({r for st, _, r in results if r}),
                      "wall_s": round(time.monotonic() - t0, 2)}), flush=True)


if __name__ == "__main__":
    main()
