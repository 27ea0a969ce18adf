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
        put("cel_parsers", e.encode())
    for pattern, text in REGEX_SEEDS:
        put("regex", pattern.encode() + b"\x00" + text.encode())
    for q in ["1", "0", "1500m", "4Gi", "1e3", "2.5k", "-3Mi", "0.001", "1E", "9223372036854775807", "12n\n3u"]:
        put("quantity", q.encode())
    for i in range(4):
        put("cycle", bytes([i, 9, 8, 1, 0, 8, 2, 0, 8, 3, 1, 8, 0, 2]))
    kswe_imports_seeds()
    component_events_seeds()


# `matches()` patterns (the recorded cycles call no `matches()`), each with a text: Unicode classes,
# case folding, Go's ASCII Perl classes and word boundaries, anchors and flags.
REGEX_SEEDS = [
    (r"^\p{Lu}[\p{Nd}]+-\p{Latin}+$", "A12-abc"),
    (r"(?i)^k\w+$", "\u212aelvin"),
    (r"^\d+\s\bx", "12 x"),
    (r"(?m)^b$|(?s)a.c", "a\nc\nb"),
    (r"[^\s\S]|[[:alpha:]]{2,3}?é", "abé"),
    (r"\p{Greek}+(?U)a*", "λa"),
]


# The byte layouts below follow `arbitrary` 1.x: a Vec is a sequence of elements each preceded by
# a byte with its low bit set, ended by a byte with it clear; integers are little-endian; a choice
# among N variants is one byte modulo N.

# Host functions of the KSWE host in the interpreter's order (host/src/kswe/table.rs: UPSTREAM,
# DRA, WASI), plus one for memory.grow.
KSWE_HOST_FUNCTIONS = 21 + 6 + 46 + 1


def arg(kind, value):
    size = {0: 2, 1: 2, 2: 1, 3: 4, 4: 8}[kind]
    return bytes([kind]) + value.to_bytes(size, "little")


def call(function, args):
    return b"\x01" + function.to_bytes(2, "little") + b"".join(arg(k, v) for k, v in args)


def kswe_imports_seeds():
    """One program per host function with in-bounds pointers, one with hostile ones."""
    sane = [(0, 0x1000), (2, 64), (0, 0x2000), (2, 64), (2, 0)]
    hostile = [(3, 0xFFFFFFF0), (3, 0x7FFFFFFF), (1, 4), (3, 0x80000000), (4, 1 << 40)]
    for f in range(KSWE_HOST_FUNCTIONS):
        put("kswe_imports", call(f, sane) + b"\x00")
        put("kswe_imports", call(f, hostile) + b"\x00")
    put("kswe_imports", b"".join(call(f, sane) for f in range(0, KSWE_HOST_FUNCTIONS, 3)) + b"\x00")


def ev(kind, obj, damage=b"\x00"):
    return b"\x01" + bytes([kind, obj]) + damage


def batch(events):
    return b"\x01" + b"".join(events) + b"\x00"


def component_events_seeds():
    """Load the cluster; then updates, deletes and damaged objects (cut, kind swapped, a leaf)."""
    with open(os.path.join(TESTDATA, "multi-node-packing-compatible-lock", "cluster.json")) as f:
        n = len(json.load(f)["items"])
    load = [batch([ev(0, i) for i in range(lo, min(n, lo + 16))]) for lo in range(0, n, 16)]
    put("component_events", b"".join(load) + b"\x00")
    put("component_events", b"".join(load) + batch([ev(2, i) for i in range(min(n, 16))]) + b"\x00")
    put("component_events", b"".join(load) + batch([ev(1, i) for i in range(min(n, 16))]) + b"\x00")
    truncate = bytes([3]) + (40).to_bytes(2, "little")
    put("component_events", batch([ev(0, i, truncate) for i in range(min(n, 16))]) + b"\x00")
    for k in range(9):
        put("component_events", b"".join(load) + batch([ev(1, i, bytes([5, k])) for i in range(min(n, 16))]) + b"\x00")
    for leaf in range(24):
        # Leaf::Int (tag 1) with an 8-byte value; Leaf::Null (tag 3).
        value = bytes([1]) + (-1 - leaf).to_bytes(8, "little", signed=True) if leaf % 2 else bytes([3])
        damage = bytes([2]) + (leaf * 7).to_bytes(2, "little") + value
        put("component_events", b"".join(load) + batch([ev(1, i, damage) for i in range(min(n, 16))]) + b"\x00")


if __name__ == "__main__":
    main()
