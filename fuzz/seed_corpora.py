#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/) from testdata/.

Deterministic; run from anywhere: `python3 fuzz/seed_corpora.py`. Seeds are small on purpose: the
normal test suite replays every committed corpus file (host/tests/fuzz_corpora.rs).
"""

import hashlib
import json
import os
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
TESTDATA = os.path.join(HERE, "..", "testdata")


def put(target, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def walk(v, parent, out):
    if isinstance(v, dict):
        for k, c in v.items():
            if k == "expression" and isinstance(c, str):
                out.add((True, c))
            elif parent == "cel" and isinstance(c, str):
                out.add((False, c))
            else:
                walk(c, k, out)
    elif isinstance(v, list):
        for c in v:
            walk(c, parent, out)


def main():
    exprs = set()
    objects = {}
    for scen in sorted(os.listdir(TESTDATA)):
        d = os.path.join(TESTDATA, scen)
        if not os.path.isdir(d) or scen.startswith("large"):
            continue
        with open(os.path.join(d, "cluster.json")) as f:
            cluster = json.load(f)
        walk(cluster, "", exprs)
        if os.path.exists(os.path.join(d, "config.json")):
            with open(os.path.join(d, "config.json")) as f:
                walk(json.load(f), "", exprs)
        for item in cluster["items"]:
            objects.setdefault(item["kind"], json.dumps(item, sort_keys=True).encode())
    for kind in sorted(objects):
        put("objects", objects[kind])
    put("objects", json.dumps({"kind": "List", "items": [json.loads(o) for o in objects.values()]}).encode())
    nic = json.dumps({"apiVersion": "networking.example.com/v1", "kind": "NICConfig", "subnetID": "a"})
    for selector, e in sorted(exprs):
        put("cel", (b"\x00" if selector else b"\x01") + e.encode() + (b"" if selector else b"\x00" + nic.encode()))
    for q in ["1", "0", "1500m", "4Gi", "1e3", "2.5k", "-3Mi", "0.001", "1E", "9223372036854775807", "12n\n3u"]:
        put("quantity", q.encode())
    for i in range(4):
        put("cycle", bytes([i, 9, 8, 1, 0, 8, 2, 0, 8, 3, 1, 8, 0, 2]))


if __name__ == "__main__":
    main()
