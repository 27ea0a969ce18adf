#!/usr/bin/env python3
"""Writes cluster.json (and config.json where used) for the hand-derived scenarios in testdata/.

Run from anywhere: `python3 testdata/gen_scenarios.py`. Output is deterministic. Each scenario's
README.md (written by hand, not generated) states the expected decisions; expected.json is produced
by the replay tool and checked against the README, never by this script.
"""

import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ directory among the scenario directories

import gen_recorded  # noqa: E402
from k8sfixtures import Cluster, device, exact, extractor, i, opaque, s, v  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

# ------------------------------------------------------------------------------------------------
# networking.example.com: multi-allocatable NICs with a slot count, subnet affinity
# ------------------------------------------------------------------------------------------------
NET = "networking.example.com"
NIC_CLASS = "nic.networking.example.com"
SLOTS = NET + "/slots"
NIC_GUARD = 'object.apiVersion == "networking.example.com/v1" && object.kind == "NICConfig"'
SUBNET_EXPR = NIC_GUARD + " ? object.subnetID : \"\""
PKEY_EXPR = NIC_GUARD + " ? object.ibPKey : \"\""


def nic(name, slots, index, vendor="acme", model="cx7", speed=100):
    return device(
        name,
        attributes={
            NET + "/ifName": s(name),
            NET + "/linkSpeedGbps": i(speed),
            NET + "/model": s(model),
            NET + "/pciAddress": s("0000:%02x:00.0" % (0x3B + index)),
            NET + "/vendor": s(vendor),
        },
        capacity={SLOTS: {"requestPolicy": {"default": "1", "validValues": ["1"]}, "value": str(slots)}},
    )


def nic_config(subnet, pkey=None, requests=None, mtu=9000):
    p = {"apiVersion": NET + "/v1", "kind": "NICConfig", "mtu": mtu, "subnetID": subnet}
    if pkey is not None:
        p["ibPKey"] = pkey
    return opaque(NET, p, requests)


def nic_request(name="nic"):
    return exact(name, NIC_CLASS, {SLOTS: "1"})


def nic_class(c):
    c.device_class(NIC_CLASS, ['device.driver == "networking.example.com" && device.allowMultipleAllocations == true'])


def nic_node(c, node, devices, affinity, suffixes=("7kq2x", "zm4tb")):
    """Node + its NIC pool: a device slice, and a metadata slice when `affinity` is given."""
    c.node(node)
    count = 2 if affinity else 1
    c.device_slice(node, NET, devices, suffixes[0], count=count)
    if affinity:
        c.affinity_slice(node, NET, affinity, suffixes[1], count=count)


def bound_nic(c, ns, pod, node, dev, template, created, entry="nic"):
    """A running pod whose template-generated claim holds one slot of `dev` on `node`."""
    claim = "%s-%s" % (pod, entry)
    t = c._templates[(ns, template)]["spec"]["spec"]["devices"]
    alloc = c.allocation(node, [(ns, claim, entry, NET, node, dev, {SLOTS: "1"}, True)], t.get("config"),
                         at=created + 2)
    c.claim_from_template(ns, pod, entry, template, alloc, created=created + 1)
    c.pod(ns, pod, [(entry, "template", template)], created, node=node, generated={entry: claim})


def write(c, name, config=None):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    c.write(os.path.join(d, "cluster.json"))
    cfg = os.path.join(d, "config.json")
    if config is not None:
        with open(cfg, "w") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
    elif os.path.exists(cfg):
        os.remove(cfg)


# ------------------------------------------------------------------------------------------------
# (1) and (9a): 16-slot single-subnet NIC, 17 pods of one subnet
# ------------------------------------------------------------------------------------------------
def nic_16_slots(name, in_slice):
    c = Cluster(name)
    nic_class(c)
    devs = [nic("eth1", 16, 0), nic("eth2", 16, 1), nic("eth3", 16, 2)]
    nic_node(c, "worker-1", devs, [extractor({"subnet": SUBNET_EXPR})] if in_slice else None)
    c.template("tenant-x", "nic-subnet-x", [nic_request()], [nic_config("subnet-x")])
    for n in range(17):
        c.pod("tenant-x", "web-%02d" % n, [("nic", "template", "nic-subnet-x")], created=n,
              image="registry.example.com/web:2.3.1")
    config = None if in_slice else {"sharingAffinity": [{"cel": {"subnet": SUBNET_EXPR}, "driver": NET}]}
    write(c, name, config)


# ------------------------------------------------------------------------------------------------
# (2) RDMA partition key
# ------------------------------------------------------------------------------------------------
RDMA = "rdma.example.com"
QP = RDMA + "/queuePairs"


def rdma():
    name = "rdma-pkey-locked-mlx5-0-next-device"
    c = Cluster(name)
    c.device_class("hca.rdma.example.com", ['device.driver == "rdma.example.com"'])
    c.node("gpu-node-1", instance_type="p5.48xlarge")

    def hca(dev, ib, idx):
        return device(dev, attributes={RDMA + "/firmware": v("28.39.1002"), RDMA + "/ibDevice": s(ib),
                                       RDMA + "/linkLayer": s("InfiniBand"), RDMA + "/numaNode": i(idx)},
                      capacity={QP: {"requestPolicy": {"default": "32", "validRange": {"min": "32", "step": "32"}},
                                     "value": "256"}})

    c.device_slice("gpu-node-1", RDMA, [hca("mlx5-0", "mlx5_0", 0), hca("mlx5-1", "mlx5_1", 1)], "h2vfq", count=2)
    c.affinity_slice("gpu-node-1", RDMA, [extractor({
        "pkey": 'object.apiVersion == "rdma.example.com/v1" && object.kind == "RDMAConfig" ? object.pKey : ""'})],
        "p8wnr", count=2)
    for pk in ("8001", "8002", "8003"):
        c.template("ml-team", "rdma-pkey-" + pk, [exact("hca", "hca.rdma.example.com", {QP: "32"})],
                   [opaque(RDMA, {"apiVersion": RDMA + "/v1", "gidIndex": 3, "kind": "RDMAConfig",
                                  "pKey": "0x" + pk})])
    for pod, created in (("trainer-a", -7200), ("trainer-b", -7000)):
        claim = pod + "-hca"
        cfg = c._templates[("ml-team", "rdma-pkey-8001")]["spec"]["spec"]["devices"]["config"]
        alloc = c.allocation("gpu-node-1", [("ml-team", claim, "hca", RDMA, "gpu-node-1", "mlx5-0", {QP: "32"}, True)],
                             cfg, at=created + 2)
        c.claim_from_template("ml-team", pod, "hca", "rdma-pkey-8001", alloc, created=created + 1)
        c.pod("ml-team", pod, [("hca", "template", "rdma-pkey-8001")], created, node="gpu-node-1",
              generated={"hca": claim}, image="registry.example.com/trainer:0.9.4", app="trainer")
    for n, (pod, pk) in enumerate((("trainer-c", "8002"), ("trainer-d", "8001"), ("trainer-e", "8003"))):
        c.pod("ml-team", pod, [("hca", "template", "rdma-pkey-" + pk)], created=n,
              image="registry.example.com/trainer:0.9.4", app="trainer")
    write(c, name)


# ------------------------------------------------------------------------------------------------
# (3) FPGA bitstreams, standalone claims
# ------------------------------------------------------------------------------------------------
FPGA = "fpga.example.com"
HBM = FPGA + "/hbm"


def fpga():
    name = "fpga-two-bitstreams-lock-blocks-free-capacity"
    c = Cluster(name)
    c.device_class("fpga.example.com", ['device.driver == "fpga.example.com"'])
    c.node("fpga-node-1", instance_type="f2.12xlarge")

    def card(dev, idx):
        return device(dev, attributes={FPGA + "/model": s("alveo-u250"), FPGA + "/pciAddress": s("0000:%02x:00.1" % (0x81 + idx)),
                                       FPGA + "/shell": s("xilinx_u250_gen3x16_xdma_shell_4_1")},
                      capacity={HBM: {"requestPolicy": {"default": "4Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},
                                      "value": "16Gi"}})

    c.device_slice("fpga-node-1", FPGA, [card("fpga-0", 0), card("fpga-1", 1)], "c5rtl", count=2)
    c.affinity_slice("fpga-node-1", FPGA, [extractor({
        "bitstream": 'object.apiVersion == "fpga.example.com/v1alpha1" && object.kind == "FpgaConfig" ? object.bitstream : ""'})],
        "x2dkw", count=2)
    pods = [("ml-1", "bitstream-ml-v2", "4Gi"), ("crypto-1", "bitstream-crypto-v1", "4Gi"),
            ("ml-2", "bitstream-ml-v2", "4Gi"), ("crypto-2", "bitstream-crypto-v1", "4Gi"),
            ("ml-3", "bitstream-ml-v2", None), ("ml-4", "bitstream-ml-v2", "8Gi")]
    for n, (pod, bit, hbm) in enumerate(pods):
        claim = pod + "-fpga"
        c.claim("accel", claim, [exact("fpga", "fpga.example.com", {HBM: hbm} if hbm else None)],
                [opaque(FPGA, {"apiVersion": FPGA + "/v1alpha1", "bitstream": bit, "clockMHz": 300,
                               "kind": "FpgaConfig"})], created=n - 60)
        c.pod("accel", pod, [("fpga", "claim", claim)], created=n,
              image="registry.example.com/%s:1.2.0" % pod.split("-")[0], app=pod.split("-")[0])
    write(c, name)


# ------------------------------------------------------------------------------------------------
# (4) multi-key subnet + pkey, one claim without ibPKey
# ------------------------------------------------------------------------------------------------
def multi_key(name, in_slice):
    c = Cluster(name)
    nic_class(c)
    devs = [nic("ib0", 8, 0, model="cx7-ib"), nic("ib1", 8, 1, model="cx7-ib"), nic("ib2", 8, 2, model="cx7-ib")]
    ex = {"pkey": PKEY_EXPR, "subnet": SUBNET_EXPR}
    nic_node(c, "ib-node-1", devs, [extractor(ex)] if in_slice else None)
    for t, sub, pk in (("net-a-8001", "subnet-a", "0x8001"), ("net-a-8002", "subnet-a", "0x8002"),
                       ("net-a-nopkey", "subnet-a", None), ("net-b-8001", "subnet-b", "0x8001"),
                       ("net-b-8002", "subnet-b", "0x8002")):
        c.template("hpc", t, [nic_request()], [nic_config(sub, pk)])
    bound_nic(c, "hpc", "job-a", "ib-node-1", "ib0", "net-a-8001", -5400)
    for n, (pod, t) in enumerate((("job-b", "net-a-8002"), ("job-c", "net-a-8001"), ("job-d", "net-a-nopkey"),
                                  ("job-e", "net-b-8001"), ("job-f", "net-b-8002"))):
        c.pod("hpc", pod, [("nic", "template", t)], created=n, image="registry.example.com/mpi-job:5.0.3", app="job")
    config = None
    if not in_slice:
        config = {"sharingAffinity": [{"cel": ex, "driver": NET, "pool": "ib-node-1"}]}
    write(c, name, config)


# ------------------------------------------------------------------------------------------------
# (5) and (9b): heterogeneous pool, NIC vs VF extractors, common `vendor` key
# ------------------------------------------------------------------------------------------------
HNET = "net.example.com"
HSLOTS = HNET + "/slots"
NIC_SEL = 'device.attributes["net.example.com"].type == "nic"'
VF_SEL = 'device.attributes["net.example.com"].type == "vf"'
H_NIC = 'object.apiVersion == "net.example.com/v1" && object.kind == "NICConfig"'
H_VF = 'object.apiVersion == "net.example.com/v1" && object.kind == "VFConfig"'
H_NIC_EX = {"subnet": H_NIC + ' ? object.subnetID : ""', "vendor": H_NIC + ' ? object.vendor : ""'}
H_VF_EX = {"vendor": H_VF + ' ? object.vendor : ""', "vlan": H_VF + ' ? string(object.vlanID) : ""'}


# The same choices written as Go regular expressions with Unicode classes and case folding: "nic" is
# one letter that folds to an uppercase one, then "ic" matched case-insensitively as "IC"; "vf" a
# Latin letter, then one that is not Greek. The decisions must be the equality selectors' decisions.
NIC_RE = 'device.attributes["net.example.com"].type.matches("(?i)^\\\\p{Lu}IC$")'
VF_RE = 'device.attributes["net.example.com"].type.matches("^\\\\p{Latin}\\\\P{Greek}$")'


def heterogeneous(name, in_slice, nic_sel=NIC_SEL, vf_sel=VF_SEL):
    c = Cluster(name)
    c.device_class("nic.net.example.com", ['device.driver == "net.example.com" && ' + nic_sel])
    c.device_class("vf.net.example.com", ['device.driver == "net.example.com" && ' + vf_sel])
    c.node("edge-node-1", instance_type="edge-xl")

    def hdev(dev, typ, slots, idx, parent=None):
        attrs = {HNET + "/pciAddress": s("0000:%02x:00.%d" % (0x5E, idx)), HNET + "/type": s(typ)}
        if parent:
            attrs[HNET + "/parent"] = s(parent)
        return device(dev, attributes=attrs,
                      capacity={HSLOTS: {"requestPolicy": {"default": "1", "validValues": ["1"]}, "value": str(slots)}})

    devs = [hdev("nic-0", "nic", 8, 0), hdev("nic-1", "nic", 8, 1), hdev("vf-0", "vf", 4, 2, "nic-0"),
            hdev("vf-1", "vf", 4, 3, "nic-1")]
    count = 2 if in_slice else 1
    c.device_slice("edge-node-1", HNET, devs, "q7b3n", count=count)
    if in_slice:
        c.affinity_slice("edge-node-1", HNET, [extractor(H_NIC_EX, nic_sel), extractor(H_VF_EX, vf_sel)], "w4jzs",
                         count=count)

    def nic_cfg(subnet, vendor, requests=None):
        return opaque(HNET, {"apiVersion": HNET + "/v1", "kind": "NICConfig", "subnetID": subnet, "vendor": vendor},
                      requests)

    def vf_cfg(vlan, vendor, requests=None):
        return opaque(HNET, {"apiVersion": HNET + "/v1", "kind": "VFConfig", "vendor": vendor, "vlanID": vlan},
                      requests)

    nreq = exact("nic", "nic.net.example.com", {HSLOTS: "1"})
    vreq = exact("vf", "vf.net.example.com", {HSLOTS: "1"})
    c.template("edge", "nic-a-acme", [nreq], [nic_cfg("subnet-a", "acme")])
    c.template("edge", "nic-a-globex", [nreq], [nic_cfg("subnet-a", "globex")])
    c.template("edge", "vf-100-acme", [vreq], [vf_cfg(100, "acme")])
    c.template("edge", "vf-100-globex", [vreq], [vf_cfg(100, "globex")])
    c.template("edge", "vf-200-acme", [vreq], [vf_cfg(200, "acme")])
    c.template("edge", "nic-and-vf-acme", [nreq, vreq],
               [nic_cfg("subnet-a", "acme", ["nic"]), vf_cfg(100, "acme", ["vf"])])
    for n, (pod, t) in enumerate((("app-nic-1", "nic-a-acme"), ("app-vf-1", "vf-100-acme"),
                                  ("app-vf-2", "vf-100-globex"), ("app-nic-2", "nic-a-globex"),
                                  ("app-vf-3", "vf-200-acme"), ("app-both", "nic-and-vf-acme"))):
        c.pod("edge", pod, [("net", "template", t)], created=n, image="registry.example.com/edge-gw:3.1.0", app="app")
    config = None
    if not in_slice:
        config = {"sharingAffinity": [
            {"cel": H_NIC_EX, "driver": HNET, "pool": "edge-node-1", "selector": {"cel": {"expression": nic_sel}}},
            {"cel": H_VF_EX, "driver": HNET, "pool": "edge-node-1", "selector": {"cel": {"expression": vf_sel}}}]}
    write(c, name, config)


# ------------------------------------------------------------------------------------------------
# (6) plain consumable capacity, no affinity
# ------------------------------------------------------------------------------------------------
GPU = "gpu.example.com"
GMEM = GPU + "/memory"


def consumable():
    name = "consumable-memory-validrange-no-affinity"
    c = Cluster(name)
    c.device_class("gpu.example.com", ['device.driver == "gpu.example.com" && device.allowMultipleAllocations == true'])
    c.node("gpu-node-1", instance_type="p4d.24xlarge")
    gpu = device("gpu-0", attributes={GPU + "/model": s("a100-sxm4-40gb"), GPU + "/driverVersion": v("580.65.6"),
                                      GPU + "/uuid": s("GPU-4f2d6a8c-1b9e-4c37-9d0a-7e51b3c2f806")},
                 capacity={GMEM: {"requestPolicy": {"default": "4Gi",
                                                    "validRange": {"max": "20Gi", "min": "2Gi", "step": "2Gi"}},
                                  "value": "40Gi"}})
    c.device_slice("gpu-node-1", GPU, [gpu], "k3n8d", count=1)
    pods = [("infer-1", "5Gi"), ("infer-2", None), ("infer-3", "24Gi"), ("infer-4", "16Gi"), ("infer-5", "12Gi"),
            ("infer-6", "3Gi"), ("infer-7", "2Gi")]
    for n, (pod, mem) in enumerate(pods):
        claim = pod + "-gpu"
        c.claim("inference", claim, [exact("gpu", "gpu.example.com", {GMEM: mem} if mem else None)], created=n - 60)
        c.pod("inference", pod, [("gpu", "claim", claim)], created=n, image="registry.example.com/llm-serve:0.7.2",
              app="infer")
    write(c, name)


# ------------------------------------------------------------------------------------------------
# (7) locks rebuilt from claims allocated at start
# ------------------------------------------------------------------------------------------------
def rebuild():
    name = "allocated-claims-rebuild-locks"
    c = Cluster(name)
    nic_class(c)
    devs = [nic("eth1", 4, 0), nic("eth2", 4, 1), nic("eth3", 4, 2)]
    nic_node(c, "net-node-1", devs, [extractor({"subnet": SUBNET_EXPR})])
    for color in ("blue", "green", "red", "yellow"):
        c.template("shop", "net-" + color, [nic_request()], [nic_config("subnet-" + color)])
    # db-0 uses a standalone claim; the others template-generated ones.
    cfg = [nic_config("subnet-blue")]
    alloc = c.allocation("net-node-1", [("shop", "db-0-net", "nic", NET, "net-node-1", "eth1", {SLOTS: "1"}, True)],
                         cfg, at=-9000)
    c.claim("shop", "db-0-net", [nic_request()], cfg, created=-9100, allocation=alloc, reserved_for=["db-0"])
    c.pod("shop", "db-0", [("nic", "claim", "db-0-net")], -9050, node="net-node-1",
          image="registry.example.com/postgres:17.5")
    bound_nic(c, "shop", "db-1", "net-node-1", "eth1", "net-blue", -8000)
    bound_nic(c, "shop", "cache-0", "net-node-1", "eth2", "net-green", -7000)
    for n, (pod, color) in enumerate((("cache-1", "green"), ("api-0", "red"), ("db-2", "blue"), ("db-3", "blue"),
                                      ("web-0", "yellow"), ("db-4", "blue"))):
        c.pod("shop", pod, [("nic", "template", "net-" + color)], created=n,
              image="registry.example.com/%s:1.0.0" % pod.split("-")[0])
    write(c, name)


# ------------------------------------------------------------------------------------------------
# (8) a pod that fits nowhere
# ------------------------------------------------------------------------------------------------
def nowhere():
    name = "pod-fits-nowhere-lock-conflict-and-full"
    c = Cluster(name)
    nic_class(c)
    nic_node(c, "node-a", [nic("eth1", 8, 0)], [extractor({"subnet": SUBNET_EXPR})], ("b6mfs", "r9tqc"))
    nic_node(c, "node-b", [nic("eth1", 2, 0, model="cx5", speed=25)], [extractor({"subnet": SUBNET_EXPR})],
             ("d2lxh", "n5gpv"))
    for sub in ("a", "c"):
        c.template("team", "net-" + sub, [nic_request()], [nic_config("subnet-" + sub)])
    bound_nic(c, "team", "a-0", "node-a", "eth1", "net-a", -6000)
    bound_nic(c, "team", "c-0", "node-b", "eth1", "net-c", -5000)
    bound_nic(c, "team", "c-1", "node-b", "eth1", "net-c", -4000)
    c.pod("team", "orphan", [("nic", "template", "net-c")], created=0, app="orphan")
    c.pod("team", "peer", [("nic", "template", "net-a")], created=1, app="peer")
    write(c, name)


# ------------------------------------------------------------------------------------------------
# (11) two nodes: a pod goes where a compatible lock exists
# ------------------------------------------------------------------------------------------------
def multi_node():
    name = "multi-node-packing-compatible-lock"
    c = Cluster(name)
    nic_class(c)
    ex = [extractor({"subnet": SUBNET_EXPR})]
    nic_node(c, "node-a", [nic("eth1", 8, 0), nic("eth2", 8, 1)], ex, ("f8kzp", "j3wqd"))
    nic_node(c, "node-b", [nic("eth1", 8, 0), nic("eth2", 8, 1)], ex, ("t6vcm", "y2hrb"))
    for sub in ("v", "w", "x", "y", "z"):
        c.template("svc", "net-" + sub, [nic_request()], [nic_config("subnet-" + sub)])
    bound_nic(c, "svc", "svc-y-0", "node-a", "eth1", "net-y", -6000)
    bound_nic(c, "svc", "svc-x-0", "node-b", "eth1", "net-x", -5000)
    for n, (pod, sub) in enumerate((("svc-x-1", "x"), ("svc-z-0", "z"), ("svc-z-1", "z"), ("svc-y-1", "y"),
                                    ("svc-w-0", "w"), ("svc-v-0", "v"))):
        c.pod("svc", pod, [("nic", "template", "net-" + sub)], created=n, app="svc-" + sub)
    write(c, name)


# ------------------------------------------------------------------------------------------------
# Extra: Unreconstructable device, conflicting values in one claim
# ------------------------------------------------------------------------------------------------
def unreconstructable():
    name = "unreconstructable-legacy-claim-blocks-device"
    c = Cluster(name)
    nic_class(c)
    nic_node(c, "net-node-1", [nic("eth1", 8, 0), nic("eth2", 8, 1)], [extractor({"subnet": SUBNET_EXPR})])
    # Allocated before the driver published sharingAffinity: no NICConfig, so no subnet can be derived.
    alloc = c.allocation("net-node-1", [("legacy", "legacy-0-nic", "nic", NET, "net-node-1", "eth1", {SLOTS: "1"},
                                         True)], None, at=-20000)
    c.claim("legacy", "legacy-0-nic", [nic_request()], None, created=-20100, allocation=alloc,
            reserved_for=["legacy-0"])
    c.pod("legacy", "legacy-0", [("nic", "claim", "legacy-0-nic")], -20050, node="net-node-1",
          image="registry.example.com/legacy-app:0.3.0")
    for sub in ("a", "b"):
        c.template("legacy", "net-" + sub, [nic_request()], [nic_config("subnet-" + sub)])
    for n, (pod, sub) in enumerate((("new-a", "a"), ("new-b", "b"), ("new-a2", "a"))):
        c.pod("legacy", pod, [("nic", "template", "net-" + sub)], created=n, app="new")
    write(c, name)


def racy_placeholder():
    name = "racy-placeholder-two-subnets-share-eth1"
    c = Cluster(name)
    nic_class(c)
    nic_node(c, "net-node-1", [nic("eth1", 8, 0), nic("eth2", 8, 1)], [extractor({"subnet": SUBNET_EXPR})])
    for sub in ("a", "b", "c"):
        c.template("tenant", "net-" + sub, [nic_request()], [nic_config("subnet-" + sub)])
    # A placeholder workaround checked "eth1 has room" for both pods at once and bound both: eth1 is
    # held by subnet-a and subnet-b, which the lock invariant forbids.
    bound_nic(c, "tenant", "racer-a", "net-node-1", "eth1", "net-a", -300)
    bound_nic(c, "tenant", "racer-b", "net-node-1", "eth1", "net-b", -200)
    for n, (pod, sub) in enumerate((("new-a", "a"), ("new-c", "c"))):
        c.pod("tenant", pod, [("nic", "template", "net-" + sub)], created=n, app="new")
    write(c, name)


def conflicting():
    name = "claim-conflicting-subnets-unresolvable"
    c = Cluster(name)
    nic_class(c)
    nic_node(c, "net-node-1", [nic("eth1", 8, 0), nic("eth2", 8, 1)], [extractor({"subnet": SUBNET_EXPR})])
    # Both config entries are in scope for request "nic" (one for all requests, one naming it).
    c.claim("lab", "bad-0-nic", [nic_request()], [nic_config("subnet-a"), nic_config("subnet-b", requests=["nic"])],
            created=-60)
    c.pod("lab", "bad-0", [("nic", "claim", "bad-0-nic")], created=0, app="bad")
    c.template("lab", "net-a", [nic_request()], [nic_config("subnet-a")])
    c.pod("lab", "good-0", [("nic", "template", "net-a")], created=1, app="good")
    # Two requests, each with its own subnet: no cross-talk, two devices.
    c.claim("lab", "split-0-nics", [nic_request("nic-a"), nic_request("nic-b")],
            [nic_config("subnet-a", requests=["nic-a"]), nic_config("subnet-b", requests=["nic-b"])], created=-50)
    c.pod("lab", "split-0", [("nics", "claim", "split-0-nics")], created=2, app="split")
    write(c, name)


# ------------------------------------------------------------------------------------------------
# The seed's structured-configuration design beside the KEP's CEL extractors: one story, two ways
# ------------------------------------------------------------------------------------------------
def structured_config(subnet):
    """A `DeviceClaimConfiguration` with the seed's `structured` member (not in the v1 API)."""
    return {"structured": {"driver": NET, "attributes": {"subnet": s(subnet)}}}


def structured_vs_cel():
    name = "structured-config-and-cel-extractors-same-decisions"
    c = Cluster(name)
    ways = (("cel", "cel-node", ("c4lmx", "c9pvd")), ("st", "structured-node", ("s2kqb", "s7hnf")))
    for way, node, _ in ways:
        c.device_class("nic-%s.networking.example.com" % way, [
            'device.driver == "networking.example.com" && device.allowMultipleAllocations == true && '
            'device.attributes["networking.example.com"].affinityAPI == "%s"' % way])
    for way, node, suffixes in ways:
        devs = []
        for n, dev in enumerate(("eth1", "eth2", "eth3")):
            d = nic(dev, 4, n)
            d["attributes"][NET + "/affinityAPI"] = s(way)
            if way == "st":
                d["sharingAffinity"] = {"attributeKeys": ["subnet"]}
            devs.append(d)
        nic_node(c, node, devs, [extractor({"subnet": SUBNET_EXPR})] if way == "cel" else None, suffixes)
        for sub in ("w", "x", "y", "z", "none", "int"):
            cfg = []
            if sub != "none":
                cfg.append(nic_config(7 if sub == "int" else "subnet-" + sub))
            if way == "st" and sub != "none":
                cfg.append({"structured": {"driver": NET, "attributes": {
                    "subnet": i(7) if sub == "int" else s("subnet-" + sub)}}})
            req = exact("nic", "nic-%s.networking.example.com" % way, {SLOTS: "1"})
            c.template("tenant", "%s-net-%s" % (way, sub), [req], cfg)
        bound_nic(c, "tenant", "%s-y-0" % way, node, "eth2", "%s-net-y" % way, -900)
    order = ("x-0", "y-1", "x-1", "z-0", "w-0", "none-0", "int-0")
    for n, pod in enumerate(order):
        for k, (way, _, _) in enumerate(ways):
            sub = pod.split("-")[0]
            c.pod("tenant", "%s-%s" % (way, pod), [("nic", "template", "%s-net-%s" % (way, sub))],
                  created=2 * n + k, app="%s-%s" % (way, sub))
    write(c, name)


# ------------------------------------------------------------------------------------------------
# Searches that cannot succeed: counting proves two of them impossible at once, a step budget
# (upstream's Filter timeout) ends the third
# ------------------------------------------------------------------------------------------------
def search_bound_slots():
    """One pod with 17 one-slot claims over two NICs of 8 slots: 17 > 16, by counting."""
    name = "search-bound-17-one-slot-claims-on-16-slots"
    c = Cluster(name)
    nic_class(c)
    nic_node(c, "worker-1", [nic("eth1", 8, 0), nic("eth2", 8, 1)], [extractor({"subnet": SUBNET_EXPR})])
    c.template("tenant-x", "nic-subnet-x", [nic_request()], [nic_config("subnet-x")])
    c.pod("tenant-x", "many-nics", [("nic-%02d" % n, "template", "nic-subnet-x") for n in range(17)], created=0)
    c.pod("tenant-x", "one-nic", [("nic", "template", "nic-subnet-x")], created=1)
    write(c, name)


def plain_devices(count, group_size):
    """Dedicated devices `d00`..., with a `group` attribute shared by `group_size` devices in turn."""
    return [device("d%02d" % n, attributes={"gpu.example.com/group": i(n // group_size)}, multi=False)
            for n in range(count)]


def search_bound_count():
    """A claim for 28 devices where 27 exist, by counting; a claim for 27 fits."""
    name = "search-bound-count-28-of-27-dedicated"
    c = Cluster(name)
    c.device_class("gpu.example.com", ['device.driver == "gpu.example.com"'])
    c.node("worker-1")
    c.device_slice("worker-1", "gpu.example.com", plain_devices(27, 1), "q8m2x", count=1)
    c.template("ml", "gpus-28", [exact("gpus", "gpu.example.com", count=28)])
    c.template("ml", "gpus-27", [exact("gpus", "gpu.example.com", count=27)])
    c.pod("ml", "train-28", [("gpus", "template", "gpus-28")], created=0)
    c.pod("ml", "train-27", [("gpus", "template", "gpus-27")], created=1)
    write(c, name)


def search_budget():
    """13 devices with distinct groups where 12 groups exist (3 devices each): counting cannot
    tell, the search would try 3^12 ways; the step budget ends it as upstream's Filter timeout."""
    name = "search-budget-13-distinct-of-12-groups-times-out"
    c = Cluster(name)
    c.device_class("gpu.example.com", ['device.driver == "gpu.example.com"'])
    c.node("worker-1")
    c.device_slice("worker-1", "gpu.example.com", plain_devices(36, 3), "w3k9z", count=1)
    t = c.template("ml", "distinct-13", [exact("gpus", "gpu.example.com", count=13)])
    t["spec"]["spec"]["devices"]["constraints"] = [{"distinctAttribute": "gpu.example.com/group"}]
    t = c.template("ml", "distinct-12", [exact("gpus", "gpu.example.com", count=12)])
    t["spec"]["spec"]["devices"]["constraints"] = [{"distinctAttribute": "gpu.example.com/group"}]
    c.pod("ml", "spread-13", [("gpus", "template", "distinct-13")], created=0)
    c.pod("ml", "spread-12", [("gpus", "template", "distinct-12")], created=1)
    write(c, name)


def fractional_steps():
    """KEP-5075 DRAFractionalCapacityRange (v1.37): compute in steps of 100m, sharing by tenant."""
    name = "fractional-capacity-steps-250m-consumes-300m"
    accel = "accel.example.com"
    compute = accel + "/compute"
    c = Cluster(name)
    c.device_class("accel.example.com", ['device.driver == "accel.example.com" && device.allowMultipleAllocations == true'])
    c.node("accel-node-1", instance_type="g6.8xlarge")

    def card(dev, idx):
        return device(dev, attributes={accel + "/model": s("ax-100"), accel + "/index": i(idx)},
                      capacity={compute: {"requestPolicy": {"default": "100m",
                                                            "validRange": {"min": "100m", "max": "1", "step": "100m"}},
                                          "value": "1"}})

    c.device_slice("accel-node-1", accel, [card("accel-0", 0), card("accel-1", 1)], "f7p2m", count=2)
    c.affinity_slice("accel-node-1", accel, [extractor({
        "tenant": 'object.apiVersion == "accel.example.com/v1" && object.kind == "AccelConfig" ? object.tenant : ""'})],
        "t4w9q", count=2)
    pods = [("a-1", "tenant-a", "250m"), ("a-2", "tenant-a", "250m"), ("b-1", "tenant-b", "250m"),
            ("a-3", "tenant-a", "250m"), ("a-4", "tenant-a", "250m"), ("b-2", "tenant-b", None)]
    for n, (pod, tenant, amount) in enumerate(pods):
        claim = pod + "-accel"
        c.claim("jobs", claim, [exact("accel", "accel.example.com", {compute: amount} if amount else None)],
                [opaque(accel, {"apiVersion": accel + "/v1", "kind": "AccelConfig", "tenant": tenant})], created=n - 60)
        c.pod("jobs", pod, [("accel", "claim", claim)], created=n, image="registry.example.com/job:1.0.0", app="job")
    write(c, name)


def prioritized_score():
    """KEP-4816 prioritized list, scored as upstream's DynamicResources scores it: the node that
    gives the first subrequest wins over one that gives only the fallback, whatever the names."""
    name = "prioritized-list-score-first-subrequest-wins"
    gpu = "gpu.example.com"
    c = Cluster(name)
    c.device_class("gpu.example.com", ['device.driver == "gpu.example.com"'])
    for node, model in (("node-a", "t4"), ("node-b", "h100")):
        c.node(node)
        c.device_slice(node, gpu, [device("gpu-0", attributes={gpu + "/model": s(model)}, multi=False)],
                       "p%sq7z" % node[-1], count=1)
    fallback = exact("t4", "gpu.example.com", selectors=['device.attributes["gpu.example.com"].model == "t4"'])
    preferred = exact("h100", "gpu.example.com", selectors=['device.attributes["gpu.example.com"].model == "h100"'])
    t = c.template("ml", "gpu-h100-or-t4", [])
    t["spec"]["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": [
        dict(preferred["exactly"], name="h100"), dict(fallback["exactly"], name="t4")]}]
    for n in range(2):
        c.pod("ml", "train-%d" % n, [("gpu", "template", "gpu-h100-or-t4")], created=n)
    write(c, name)


def binding_conditions():
    """KEP-5007 binding conditions: a fabric-attached memory device that `bindsToNode` pins the
    claim to the node it was allocated for; a claim whose device reported its binding failure
    condition True is unavailable everywhere; PreBind waits for the conditions of a new
    allocation, and gives up after the binding timeout when no driver reports them."""
    name = "binding-conditions-binds-to-node-and-failed-binding"
    mem, gpu = "fabric.example.com", "gpu.example.com"
    c = Cluster(name)
    c.device_class("mem.fabric.example.com", ['device.driver == "fabric.example.com"'])
    c.device_class("gpu.example.com", ['device.driver == "gpu.example.com"'])
    for node in ("node-a", "node-b"):
        c.node(node)
    c.device_slice("node-b", gpu, [device("gpu-0", multi=False)], "g4k2p")

    def attached(dev):
        return dict(dev, bindsToNode=True, bindingConditions=[mem + "/Attached"],
                    bindingFailureConditions=[mem + "/AttachFailed"])

    fabric = c.device_slice("node-a", mem, [attached(device("mem-%d" % n, multi=False)) for n in range(4)],
                            "f9w3c", pool="fabric-0")
    # Reachable from every node: no nodeName, no node owner.
    del fabric["spec"]["nodeName"]
    fabric["spec"]["allNodes"] = True
    fabric["spec"] = dict(sorted(fabric["spec"].items()))
    fabric["metadata"]["name"] = "fabric-0-fabric.example.com-f9w3c"
    fabric["metadata"]["generateName"] = "fabric-0-fabric.example.com-"
    del fabric["metadata"]["ownerReferences"]

    def waiting_claim(name, node, dev, condition, at=-1700, reserved_for=None):
        """A claim allocated `dev` with the devices' binding conditions, and the driver's report."""
        alloc = c.allocation(node, [("hpc", name, "mem", mem, "fabric-0", dev, None, False)], at=at)
        for r in alloc["devices"]["results"]:
            r["bindingConditions"] = [mem + "/Attached"]
            r["bindingFailureConditions"] = [mem + "/AttachFailed"]
        claim = c.claim("hpc", name, [exact("mem", "mem.fabric.example.com")], allocation=alloc,
                        reserved_for=reserved_for)
        claim["status"]["devices"] = [{"conditions": [condition], "device": dev, "driver": mem,
                                       "pool": "fabric-0"}]

    c.template("hpc", "one-gpu", [exact("gpu", "gpu.example.com")])
    # The running solver-run uses shared-mem on node-a; the driver attached mem-0 there.
    waiting_claim("shared-mem", "node-a", "mem-0", {
        "lastTransitionTime": "2026-01-01T00:00:20Z", "message": "attached to node-a",
        "reason": "Attached", "status": "True", "type": mem + "/Attached"},
        at=-60, reserved_for=["solver-run"])
    c.pod("hpc", "solver-run", [("mem", "claim", "shared-mem")], created=-90, node="node-a")
    c.pod("hpc", "solver-0", [("mem", "claim", "shared-mem")], created=0)
    c.pod("hpc", "solver-1", [("mem", "claim", "shared-mem"), ("gpu", "template", "one-gpu")], created=1)
    # solver-2's PreBind reserved it and waited; the driver then reported the failure.
    waiting_claim("failed-mem", "node-b", "mem-1", {
        "lastTransitionTime": "2026-01-01T00:00:30Z", "message": "port 7 did not come up",
        "reason": "LinkDown", "status": "True", "type": mem + "/AttachFailed"},
        reserved_for=["solver-2"])
    c.pod("hpc", "solver-2", [("mem", "claim", "failed-mem")], created=2)
    # solver-3's earlier attempt allocated mem-2 1,700 s before the recording; the driver never
    # reported Attached True, PreBind gave up and Unreserve removed the pod: the binding timed out.
    waiting_claim("stale-mem", "node-a", "mem-2", {
        "lastTransitionTime": "2026-01-01T00:00:30Z", "message": "waiting for the fabric manager",
        "reason": "Pending", "status": "False", "type": mem + "/Attached"})
    c.pod("hpc", "solver-3", [("mem", "claim", "stale-mem")], created=3)
    # solver-4's new allocation waits in PreBind for Attached, which no driver reports in a replay.
    c.claim("hpc", "fresh-mem", [exact("mem", "mem.fabric.example.com")], created=4)
    c.pod("hpc", "solver-4", [("mem", "claim", "fresh-mem")], created=4)
    write(c, name)


def main():
    nic_16_slots("nic-subnet-16-slots-17th-opens-eth2", True)
    nic_16_slots("config-extractors-nic-subnet-16-slots", False)
    rdma()
    fpga()
    multi_key("multi-key-subnet-pkey-missing-key-rejects", True)
    multi_key("config-extractors-multi-key-pool-scoped", False)
    heterogeneous("heterogeneous-pool-nic-vf-vendor", True)
    heterogeneous("config-extractors-heterogeneous-pool-selectors", False)
    heterogeneous("regex-unicode-classes-and-case-folding-select-devices", True, NIC_RE, VF_RE)
    consumable()
    rebuild()
    nowhere()
    multi_node()
    unreconstructable()
    conflicting()
    racy_placeholder()
    structured_vs_cel()
    search_bound_slots()
    search_bound_count()
    search_budget()
    fractional_steps()
    prioritized_score()
    binding_conditions()
    gen_recorded.main()


if __name__ == "__main__":
    main()
