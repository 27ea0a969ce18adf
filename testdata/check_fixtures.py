#!/usr/bin/env python3
"""Checks every testdata/*/ scenario for consistency and API validity; exits 1 on any problem.

    python3 testdata/check_fixtures.py

It checks what the v1 API server would reject (names, limits, request policies, oneOfs), what a
recorded cluster must satisfy (unique UIDs, complete pools, claims referenced by pods exist, allocated
devices exist, reservedFor matches a bound pod, consumed capacity within device capacity) and the
conventions of this directory (pending pods with templates have no claim yet, distinct pending
creation times, README of 5..15 lines, config.json shape). It does not compute expected decisions.
"""

import json
import os
import re
import sys
from fractions import Fraction

sys.dont_write_bytecode = True

HERE = os.path.dirname(os.path.abspath(__file__))
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUB = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
EXT_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
UNITS = {"": 1, "m": Fraction(1, 1000), "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3,
         "M": 10**6, "G": 10**9}


def qty(text):
    m = re.fullmatch(r"(\d+)(m|Ki|Mi|Gi|Ti|k|M|G)?", text)
    if not m:
        raise ValueError("unsupported quantity %r" % text)
    return int(m.group(1)) * UNITS[m.group(2) or ""]


def qualified(name):
    if "/" in name:
        domain, ident = name.split("/", 1)
        return len(domain) <= 63 and bool(DNS_SUB.match(domain)) and bool(C_IDENT.match(ident))
    return bool(C_IDENT.match(name))


class Checker:
    def __init__(self, scenario):
        self.scenario = scenario
        self.problems = []

    def err(self, msg):
        self.problems.append("%s: %s" % (self.scenario, msg))

    def run(self):
        d = os.path.join(HERE, self.scenario)
        with open(os.path.join(d, "cluster.json")) as f:
            doc = json.load(f)
        if doc.get("kind") != "List" or doc.get("apiVersion") != "v1":
            self.err("cluster.json is not a v1 List")
        items = doc["items"]
        self.check_meta(items)
        by = {}
        for o in items:
            by.setdefault(o["kind"], []).append(o)
        nodes = {o["metadata"]["name"]: o for o in by.get("Node", [])}
        classes = {o["metadata"]["name"] for o in by.get("DeviceClass", [])}
        devices = self.check_slices(by.get("ResourceSlice", []), nodes)
        claims = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in by.get("ResourceClaim", [])}
        templates = {(o["metadata"]["namespace"], o["metadata"]["name"]): o
                     for o in by.get("ResourceClaimTemplate", [])}
        pods = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in by.get("Pod", [])}
        for (ns, name), c in claims.items():
            self.check_claim_spec("ResourceClaim %s/%s" % (ns, name), c["spec"], classes)
        for (ns, name), t in templates.items():
            self.check_claim_spec("ResourceClaimTemplate %s/%s" % (ns, name), t["spec"]["spec"], classes)
        self.check_pods(pods, claims, templates, nodes)
        self.check_extended(pods, claims)
        self.check_allocations(claims, pods, devices)
        self.check_config(d)
        self.check_readme(d)
        return self.problems

    def check_meta(self, items):
        uids = set()
        for o in items:
            m = o.get("metadata", {})
            label = "%s %s" % (o.get("kind"), m.get("name"))
            for k in ("apiVersion", "kind"):
                if k not in o:
                    self.err("%s: no %s" % (label, k))
            for k in ("name", "uid", "creationTimestamp", "resourceVersion"):
                if not m.get(k):
                    self.err("%s: no metadata.%s" % (label, k))
            if m.get("uid") in uids:
                self.err("%s: duplicate uid" % label)
            uids.add(m.get("uid"))
            if o["kind"] in ("Node", "Pod", "Namespace", "Event"):
                want = ("v1",)
            elif o["kind"] == "DeviceTaintRule":
                want = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3")
            else:
                want = ("resource.k8s.io/v1",)
            if o.get("apiVersion") not in want:
                self.err("%s: apiVersion %s" % (label, o.get("apiVersion")))

    def check_slices(self, slices, nodes):
        pools = {}
        devices = {}
        for sl in slices:
            name = sl["metadata"]["name"]
            sp = sl["spec"]
            label = "ResourceSlice " + name
            if not DNS_SUB.match(name):
                self.err(label + ": name is not a DNS subdomain")
            sel = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if k in sp]
            if len(sel) != 1:
                self.err(label + ": node selection oneOf has %s" % sel)
            if sp.get("nodeName") and sp["nodeName"] not in nodes:
                self.err(label + ": unknown node " + sp["nodeName"])
            pool = sp["pool"]
            key = (sp["driver"], pool["name"], pool["generation"])
            pools.setdefault(key, []).append(sl)
            has_dev, has_aff = bool(sp.get("devices")), bool(sp.get("sharingAffinity"))
            if has_dev and has_aff:
                self.err(label + ": devices and sharingAffinity in one slice")
            if len(sp.get("devices", [])) > 128:
                self.err(label + ": more than 128 devices")
            aff = sp.get("sharingAffinity", [])
            if len(aff) > 8:
                self.err(label + ": more than 8 extractors")
            for e in aff:
                if not e.get("cel") or len(e["cel"]) > 8:
                    self.err(label + ": extractor needs 1..8 keys")
                for k in e.get("cel", {}):
                    if not C_IDENT.match(k):
                        self.err(label + ": key %r is not a C identifier" % k)
            for dv in sp.get("devices", []):
                self.check_device(label, dv)
                did = (sp["driver"], pool["name"], dv["name"])
                if did in devices:
                    self.err(label + ": duplicate device " + dv["name"])
                devices[did] = (dv, sp.get("nodeName"))
        for (drv, pname, gen), sls in pools.items():
            counts = {s["spec"]["pool"]["resourceSliceCount"] for s in sls}
            if counts != {len(sls)}:
                self.err("pool %s/%s gen %d: %d slices, resourceSliceCount %s" % (drv, pname, gen, len(sls), counts))
        return devices

    def check_device(self, label, dv):
        name = dv["name"]
        if not DNS_LABEL.match(name):
            self.err("%s: device %r is not a DNS label" % (label, name))
        attrs, caps = dv.get("attributes", {}), dv.get("capacity", {})
        if "sharingAffinity" in dv:
            # The seed's structured-configuration design (not in the v1 API; see README.md).
            keys = dv["sharingAffinity"].get("attributeKeys", [])
            if set(dv["sharingAffinity"]) != {"attributeKeys"} or not 1 <= len(keys) <= 8 \
                    or len(set(keys)) != len(keys) or not all(qualified(k) for k in keys):
                self.err("%s: device %s: sharingAffinity.attributeKeys: 1..8 distinct qualified names" % (label, name))
            if not dv.get("allowMultipleAllocations"):
                self.err("%s: device %s: sharingAffinity without allowMultipleAllocations" % (label, name))
        if len(attrs) + len(caps) > 32:
            self.err("%s: device %s has more than 32 attributes and capacities" % (label, name))
        for k, a in attrs.items():
            if not qualified(k):
                self.err("%s: device %s: attribute name %r" % (label, name, k))
            if len(a) != 1:
                self.err("%s: device %s: attribute %s must set exactly one member" % (label, name, k))
            if "string" in a and len(a["string"]) > 64:
                self.err("%s: device %s: attribute %s longer than 64" % (label, name, k))
        for k, c in caps.items():
            if not qualified(k):
                self.err("%s: device %s: capacity name %r" % (label, name, k))
            value = qty(c["value"])
            pol = c.get("requestPolicy")
            if not pol:
                continue
            where = "%s: device %s: capacity %s" % (label, name, k)
            if not dv.get("allowMultipleAllocations"):
                self.err(where + ": requestPolicy without allowMultipleAllocations")
            if ("validValues" in pol) == ("validRange" in pol):
                self.err(where + ": exactly one of validValues and validRange")
            default = qty(pol["default"]) if "default" in pol else None
            if "validValues" in pol:
                vals = [qty(x) for x in pol["validValues"]]
                if vals != sorted(vals) or len(vals) > 10 or default not in vals:
                    self.err(where + ": validValues must be sorted, at most 10, and contain default")
            if "validRange" in pol:
                r = pol["validRange"]
                lo = qty(r["min"])
                hi = qty(r["max"]) if "max" in r else None
                step = qty(r["step"]) if "step" in r else None
                if not 0 <= lo <= value or (hi is not None and hi > value):
                    self.err(where + ": validRange outside [0, value]")
                if default is not None and default < lo:
                    self.err(where + ": default below min")
                if step is not None:
                    if lo + step > value:
                        self.err(where + ": min + step above value")
                    for x in (hi, default):
                        if x is not None and x % step:
                            self.err(where + ": max/default not a multiple of step")

    def check_claim_spec(self, label, spec, classes):
        dev = spec["devices"]
        names = set()
        for r in dev["requests"]:
            if not DNS_LABEL.match(r["name"]):
                self.err("%s: request name %r" % (label, r["name"]))
            names.add(r["name"])
            ex = r.get("exactly")
            subs = r.get("firstAvailable")
            if (ex is None) == (subs is None):
                self.err("%s: request %s sets exactly one of exactly and firstAvailable" % (label, r["name"]))
                continue
            if subs is not None and not 1 <= len(subs) <= 8:
                self.err("%s: request %s: firstAvailable has 1 to 8 subrequests" % (label, r["name"]))
            for one in [ex] if ex is not None else subs:
                if ex is None and not DNS_LABEL.match(one.get("name", "")):
                    self.err("%s: subrequest name %r" % (label, one.get("name")))
                if one["deviceClassName"] not in classes:
                    self.err("%s: unknown class %s" % (label, one["deviceClassName"]))
                for k, q in one.get("capacity", {}).get("requests", {}).items():
                    qty(q)
                    if not qualified(k):
                        self.err("%s: capacity request name %r" % (label, k))
        for c in dev.get("config", []):
            for rq in c.get("requests", []):
                if rq.split("/")[0] not in names:
                    self.err("%s: config names unknown request %s" % (label, rq))
            if ("opaque" in c) == ("structured" in c):
                self.err(label + ": a config entry sets exactly one of opaque and structured")
            elif "opaque" in c:
                if len(json.dumps(c["opaque"]["parameters"])) > 10240:
                    self.err(label + ": opaque parameters above 10 KiB")
            else:
                # The seed's structured-configuration design (not in the v1 API; see README.md).
                st = c["structured"]
                if set(st) - {"driver", "attributes"} or not DNS_SUB.match(st.get("driver", "")):
                    self.err(label + ": structured needs a driver and only attributes")
                for k, a in st.get("attributes", {}).items():
                    if not qualified(k) or len(a) != 1:
                        self.err("%s: structured attribute %r: qualified name, exactly one member" % (label, k))

    def check_pods(self, pods, claims, templates, nodes):
        pending_times = {}
        for (ns, name), p in pods.items():
            label = "Pod %s/%s" % (ns, name)
            node = p["spec"].get("nodeName")
            statuses = {s["name"]: s.get("resourceClaimName") for s in p["status"].get("resourceClaimStatuses", [])}
            if node and node not in nodes:
                self.err(label + ": unknown node")
            if node and p["status"].get("phase") != "Running":
                self.err(label + ": bound but not Running")
            if not node:
                if p["status"].get("phase") != "Pending":
                    self.err(label + ": pending pod not in phase Pending")
                t = p["metadata"]["creationTimestamp"]
                if t in pending_times:
                    self.err("%s: same creationTimestamp as %s" % (label, pending_times[t]))
                pending_times[t] = name
            container_claims = {c["name"] for ctr in p["spec"]["containers"]
                                for c in ctr.get("resources", {}).get("claims", [])}
            for rc in p["spec"].get("resourceClaims", []):
                entry = rc["name"]
                if entry not in container_claims:
                    self.err("%s: claim entry %s not used by a container" % (label, entry))
                if ("resourceClaimName" in rc) == ("resourceClaimTemplateName" in rc):
                    self.err("%s: entry %s needs exactly one source" % (label, entry))
                if "resourceClaimName" in rc:
                    if (ns, rc["resourceClaimName"]) not in claims:
                        self.err("%s: claim %s missing" % (label, rc["resourceClaimName"]))
                    continue
                if (ns, rc["resourceClaimTemplateName"]) not in templates:
                    self.err("%s: template %s missing" % (label, rc["resourceClaimTemplateName"]))
                # The resource-claim controller names the claim `<pod>-<entry>-<5 random chars>`
                # (generateName); the hand-derived scenarios use `<pod>-<entry>`.
                generated = statuses.get(entry)
                base = "%s-%s" % (name, entry)
                if generated is None:
                    if node:
                        self.err("%s: bound pod without resourceClaimStatuses for %s" % (label, entry))
                    elif (ns, base) in claims:
                        self.err("%s: pending pod's template claim %s must not exist yet" % (label, base))
                    continue
                c = claims.get((ns, generated))
                if c is None:
                    self.err("%s: generated claim %s missing" % (label, generated))
                    continue
                suffix = generated[len(base) + 1:]
                if generated != base and not (generated.startswith(base + "-") and len(suffix) == 5
                                              and c["metadata"].get("generateName") == base + "-"):
                    self.err("%s: generated claim name %s" % (label, generated))
                owners = [r for r in c["metadata"].get("ownerReferences", []) if r.get("controller")]
                if [r["uid"] for r in owners] != [p["metadata"]["uid"]]:
                    self.err("%s: claim %s is not controlled by the pod" % (label, generated))
                if not node and c.get("status", {}).get("allocation"):
                    self.err("%s: pending pod's claim %s is allocated" % (label, generated))

    def check_extended(self, pods, claims):
        """KEP-5004: the claim the scheduler created for a bound pod's extended resources exists, is
        annotated and controlled by the pod, and the pod's mappings name its containers, their
        resources and the claim's requests; a pending pod has neither status nor claim yet."""
        for (ns, name), p in pods.items():
            label = "Pod %s/%s" % (ns, name)
            st = p["status"].get("extendedResourceClaimStatus")
            special = [c for (cns, _), c in claims.items() if cns == ns
                       and c["metadata"].get("annotations", {}).get(EXT_ANNOTATION) == "true"
                       and any(r.get("controller") and r["uid"] == p["metadata"]["uid"]
                               for r in c["metadata"].get("ownerReferences", []))]
            if not p["spec"].get("nodeName"):
                if st or special:
                    self.err(label + ": pending pod with an extended-resource claim or status")
                continue
            if not st:
                if special:
                    self.err(label + ": extended-resource claim without extendedResourceClaimStatus")
                continue
            c = claims.get((ns, st["resourceClaimName"]))
            if c is None or c not in special:
                self.err("%s: extendedResourceClaimStatus names %s, not its annotated claim"
                         % (label, st["resourceClaimName"]))
                continue
            if c["metadata"].get("generateName") != name + "-extended-resources-":
                self.err("%s: claim %s: generateName" % (label, st["resourceClaimName"]))
            reqs = {r["name"] for r in c["spec"]["devices"]["requests"]}
            ctrs = {ct["name"]: ct for ct in p["spec"].get("initContainers", []) + p["spec"]["containers"]}
            for m in st["requestMappings"]:
                ct = ctrs.get(m["containerName"])
                if ct is None or m["resourceName"] not in ct.get("resources", {}).get("requests", {}):
                    self.err("%s: mapping %s/%s names no container request" % (label, m["containerName"],
                                                                             m["resourceName"]))
                if m["requestName"] not in reqs:
                    self.err("%s: mapping names unknown request %s" % (label, m["requestName"]))

    def check_allocations(self, claims, pods, devices):
        consumed = {}
        for (ns, name), c in claims.items():
            label = "ResourceClaim %s/%s" % (ns, name)
            alloc = c.get("status", {}).get("allocation")
            reserved = c.get("status", {}).get("reservedFor", [])
            if not alloc:
                if reserved:
                    self.err(label + ": reservedFor without allocation")
                continue
            terms = alloc["nodeSelector"]["nodeSelectorTerms"]
            node = terms[0]["matchFields"][0]["values"][0]
            # A pod whose PreBind reserved the claim and then waited for binding conditions
            # (KEP-5007) is still pending.
            waited = any(res.get("bindingConditions") for res in alloc["devices"]["results"])
            for r in reserved:
                p = pods.get((ns, r["name"]))
                if p is None or p["metadata"]["uid"] != r["uid"] or \
                        p["spec"].get("nodeName") not in ((node, None) if waited else (node,)):
                    self.err("%s: reservedFor %s does not match a pod bound to %s" % (label, r["name"], node))
            # Unreserve after a PreBind that gave up waiting leaves such a claim allocated and
            # reserved for no pod, until a PostFilter deallocates it.
            if not reserved and not waited:
                self.err(label + ": allocated but not reserved")
            req_names = {r["name"] for r in c["spec"]["devices"]["requests"]}
            for res in alloc["devices"]["results"]:
                did = (res["driver"], res["pool"], res["device"])
                if res["request"].split("/")[0] not in req_names:
                    self.err("%s: result for unknown request %s" % (label, res["request"]))
                if did not in devices:
                    self.err("%s: device %s not in any slice" % (label, "/".join(did)))
                    continue
                dv, dnode = devices[did]
                # A device reachable from every node (allNodes) can be allocated for any.
                if dnode is not None and dnode != node:
                    self.err("%s: device %s is on %s, allocation on %s" % (label, "/".join(did), dnode, node))
                multi = bool(dv.get("allowMultipleAllocations"))
                if multi != ("shareID" in res):
                    self.err("%s: shareID must be set iff the device allows multiple allocations" % label)
                caps = dv.get("capacity", {})
                cc = res.get("consumedCapacity")
                if multi and caps and set(cc or {}) != set(caps):
                    self.err("%s: consumedCapacity must list every capacity of %s" % (label, dv["name"]))
                for k, q in (cc or {}).items():
                    consumed.setdefault(did, {}).setdefault(k, 0)
                    consumed[did][k] += qty(q)
            spec_cfg = c["spec"]["devices"].get("config", [])
            alloc_cfg = [{k: v for k, v in x.items() if k != "source"} for x in alloc["devices"].get("config", [])]
            if alloc_cfg != spec_cfg:
                self.err(label + ": allocation config is not the claim config (FromClaim)")
        for did, caps in consumed.items():
            dv = devices[did][0]
            for k, total in caps.items():
                if total > qty(dv["capacity"][k]["value"]):
                    self.err("device %s: %s over-consumed at start" % ("/".join(did), k))

    def check_config(self, d):
        path = os.path.join(d, "config.json")
        if not os.path.exists(path):
            return
        with open(path) as f:
            cfg = json.load(f)
        if set(cfg) != {"sharingAffinity"}:
            self.err("config.json: only sharingAffinity is expected")
        for e in cfg.get("sharingAffinity", []):
            if not e.get("driver") or not e.get("cel"):
                self.err("config.json: entry needs driver and cel")
            if set(e) - {"driver", "pool", "selector", "cel"}:
                self.err("config.json: unknown fields %s" % (set(e) - {"driver", "pool", "selector", "cel"}))

    def check_readme(self, d):
        path = os.path.join(d, "README.md")
        if not os.path.exists(path):
            self.err("README.md missing")
            return
        with open(path) as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
        if not 5 <= len(lines) <= 17:  # 5..15 lines of text plus the title and "Expected" heading
            self.err("README.md has %d non-empty lines" % len(lines))


def main():
    problems = []
    scenarios = sorted(e for e in os.listdir(HERE) if os.path.isdir(os.path.join(HERE, e)))
    for sc in scenarios:
        if not os.path.exists(os.path.join(HERE, sc, "cluster.json")):
            problems.append("%s: directory without cluster.json" % sc)
            continue
        problems += Checker(sc).run()
    for p in problems:
        print(p)
    print("%d scenarios checked, %d problems" % (len(scenarios), len(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
