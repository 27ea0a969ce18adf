#!/usr/bin/env python3
"""Generates testdata/large-32-nodes-60-pods/cluster.json: one larger scheduling cycle for latency figures.

    python3 testdata/gen_large.py            # (re)write cluster.json, print the expected summary
    python3 testdata/gen_large.py --list     # also print the expected node/device of every pending pod

Shape (all deterministic, seed 5981):
- 32 nodes node-00..node-31; node n has 4 + (3n mod 5) NICs (4..8, 191 in all), eth1.., each
  multi-allocatable with 4 slots (requestPolicy default 1, validValues [1]); one pool per node with a
  device slice and a KEP-5981 metadata slice carrying the `subnet` extractor.
- 24 running pods with allocated claims (the starting state: 1..4 shares on scattered devices, so
  some devices start locked to a subnet).
- 60 pending pods job-000..job-059 (namespace batch), each with one template claim of 1 slot on one
  of 5 subnets.

The expected outcome printed here comes from a small reference model of the documented semantics
(devices locked to another subnet are not viable; per node the allocator takes the first
locked-compatible device with a free slot, else the first clean device; node score 2 for a
locked-compatible device, 1 for a clean one; best score wins, ties by node name). It is a cross-check
for the README, not a replacement for the plugin.
"""

import os
import random
import sys

sys.dont_write_bytecode = True  # no __pycache__ directory among the scenario directories

from k8sfixtures import Cluster, device, exact, extractor, i, opaque, s  # noqa: E402

NAME = "large-32-nodes-60-pods"
NET = "networking.example.com"
NIC_CLASS = "nic.networking.example.com"
SLOTS = NET + "/slots"
SLOTS_PER_DEVICE = 4
SUBNET_EXPR = ('object.apiVersion == "networking.example.com/v1" && object.kind == "NICConfig" '
               '? object.subnetID : ""')
SUBNETS = ["subnet-a", "subnet-b", "subnet-c", "subnet-d", "subnet-e"]
WEIGHTS = [30, 25, 20, 15, 10]
NODES = ["node-%02d" % n for n in range(32)]
N_BOUND = 24
N_PENDING = 60


def devices_on(n):
    return ["eth%d" % (k + 1) for k in range(4 + (3 * n) % 5)]


def suffix(rng):
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))


def nic(name, k):
    return device(name, attributes={NET + "/ifName": s(name), NET + "/linkSpeedGbps": i(100),
                                    NET + "/model": s("cx7"), NET + "/pciAddress": s("0000:%02x:00.0" % (0x3B + k)),
                                    NET + "/vendor": s("acme")},
                  capacity={SLOTS: {"requestPolicy": {"default": "1", "validValues": ["1"]},
                                    "value": str(SLOTS_PER_DEVICE)}})


def template_name(subnet):
    return "net-" + subnet


def build():
    rng = random.Random(5981)
    c = Cluster(NAME)
    c.device_class(NIC_CLASS, ['device.driver == "networking.example.com" && device.allowMultipleAllocations == true'])
    for n, node in enumerate(NODES):
        c.node(node, zone="zone-%s" % "abc"[n % 3])
        c.device_slice(node, NET, [nic(d, k) for k, d in enumerate(devices_on(n))], suffix(rng), count=2)
        c.affinity_slice(node, NET, [extractor({"subnet": SUBNET_EXPR})], suffix(rng), count=2)
    for sub in SUBNETS:
        c.template("batch", template_name(sub), [exact("nic", NIC_CLASS, {SLOTS: "1"})],
                   [opaque(NET, {"apiVersion": NET + "/v1", "kind": "NICConfig", "mtu": 9000, "subnetID": sub})])

    # Starting state: running pods on random devices, respecting locks and slots.
    locks, used = {}, {}
    bound = []
    while len(bound) < N_BOUND:
        n = rng.randrange(len(NODES))
        node, dev = NODES[n], rng.choice(devices_on(n))
        sub = rng.choices(SUBNETS, WEIGHTS)[0]
        key = (node, dev)
        if locks.get(key, sub) != sub or used.get(key, 0) >= SLOTS_PER_DEVICE:
            continue
        locks[key] = sub
        used[key] = used.get(key, 0) + 1
        bound.append((node, dev, sub))
    for k, (node, dev, sub) in enumerate(bound):
        pod = "svc-%03d" % k
        created = -20000 + 300 * k
        claim = pod + "-nic"
        cfg = c._templates[("batch", template_name(sub))]["spec"]["spec"]["devices"]["config"]
        alloc = c.allocation(node, [("batch", claim, "nic", NET, node, dev, {SLOTS: "1"}, True)], cfg,
                             at=created + 2)
        c.claim_from_template("batch", pod, "nic", template_name(sub), alloc, created=created + 1)
        c.pod("batch", pod, [("nic", "template", template_name(sub))], created, node=node,
              generated={"nic": claim}, image="registry.example.com/svc:4.2.0", app="svc")

    pending = []
    for k in range(N_PENDING):
        sub = rng.choices(SUBNETS, WEIGHTS)[0]
        pod = "job-%03d" % k
        c.pod("batch", pod, [("nic", "template", template_name(sub))], created=k,
              image="registry.example.com/batch-job:1.8.0", app="job")
        pending.append((pod, sub))
    return c, locks, used, pending


def expect(locks, used, pending):
    """Reference model of the documented semantics; returns [(pod, subnet, node, device, score)]."""
    locks, used = dict(locks), dict(used)
    out = []
    for pod, sub in pending:
        best = None
        for n, node in enumerate(NODES):
            devs = devices_on(n)
            compat = [d for d in devs if locks.get((node, d)) == sub and used[(node, d)] < SLOTS_PER_DEVICE]
            clean = [d for d in devs if (node, d) not in locks]
            cand = (2, compat[0]) if compat else (1, clean[0]) if clean else None
            if cand and (best is None or cand[0] > best[0]):
                best = (cand[0], node, cand[1])
        if best is None:
            out.append((pod, sub, None, None, 0))
            continue
        score, node, dev = best
        locks[(node, dev)] = sub
        used[(node, dev)] = used.get((node, dev), 0) + 1
        out.append((pod, sub, node, dev, score))
    return out, locks, used


def main():
    c, locks, used, pending = build()
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), NAME)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "cluster.json")
    c.write(path)
    size = os.path.getsize(path)
    total_devices = sum(len(devices_on(n)) for n in range(len(NODES)))
    print("wrote %s (%d bytes): %d nodes, %d devices, %d running pods, %d pending pods"
          % (path, size, len(NODES), total_devices, N_BOUND, N_PENDING))
    print("starting locks: %d devices locked, %d slots used" % (len(locks), sum(used.values())))
    placements, end_locks, end_used = expect(locks, used, pending)
    failed = [p for p in placements if p[2] is None]
    print("expected: %d scheduled, %d unschedulable" % (len(placements) - len(failed), len(failed)))
    print("expected: %d onto an already locked compatible device (score 2), %d onto a clean device (score 1)"
          % (sum(1 for p in placements if p[4] == 2), sum(1 for p in placements if p[4] == 1)))
    nodes_used = sorted({p[2] for p in placements if p[2]})
    print("expected: pending pods land on %d nodes: %s" % (len(nodes_used), " ".join(nodes_used)))
    print("expected end state: %d devices locked, %d slots used" % (len(end_locks), sum(end_used.values())))
    for sub in SUBNETS:
        pods = [p for p in placements if p[1] == sub]
        devs = sorted({(p[2], p[3]) for p in pods})
        print("  %s: %d pending pods -> %s" % (sub, len(pods), ", ".join("%s/%s" % x for x in devs)))
    if "--list" in sys.argv:
        for pod, sub, node, dev, score in placements:
            print("%s %s -> %s %s (raw score %d)" % (pod, sub, node or "-", dev or "-", score))


if __name__ == "__main__":
    main()
