"""Scenarios shaped like recordings of real clusters (issue 12): DeviceTaintRules, and a cycle
exactly as `kubectl get ... -A -o json` prints a live cluster (managedFields, API-server defaults,
claims the resource-claim controller already created with random suffixes, kubectl's order).

Called by gen_scenarios.py; deterministic like the other generators.
"""

import json
import os

from k8sfixtures import KIND_ORDER, Cluster, device, exact, s, ts

HERE = os.path.dirname(os.path.abspath(__file__))

GPU = "gpu.example.com"
GPU_CLASS = "gpu.example.com"


def gpu(name, model, index):
    return device(name, attributes={GPU + "/model": s(model), GPU + "/index": {"int": index}},
                  capacity={GPU + "/memory": {"value": "80Gi"}}, multi=False)


def gpu_request(tolerations=None):
    r = exact("gpu", GPU_CLASS)
    if tolerations:
        r["exactly"]["tolerations"] = tolerations
    return r


def taint_rule(c, name, version, selector, key, effect, value="true", created=-600):
    spec = {"taint": {"effect": effect, "key": key, "timeAdded": ts(created), "value": value}}
    if selector is not None:
        spec["deviceSelector"] = selector
    obj = {
        "apiVersion": "resource.k8s.io/" + version,
        "kind": "DeviceTaintRule",
        "metadata": c.meta("DeviceTaintRule", name, created, generation=1),
        "spec": spec,
        "status": {},
    }
    c.items.append(obj)
    return obj


def write_list(c, name, items=None):
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    doc = c.document() if items is None else {"apiVersion": "v1", "items": items, "kind": "List",
                                               "metadata": {"resourceVersion": ""}}
    with open(os.path.join(d, "cluster.json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


# ------------------------------------------------------------------------------------------------
# DeviceTaintRules in all three versions
# ------------------------------------------------------------------------------------------------
def taint_rules():
    name = "device-taint-rules-block-one-pod-tolerating-pod-schedules"
    c = Cluster(name)
    c.node("gpu-node-1")
    c.device_class(GPU_CLASS, ['device.driver == "gpu.example.com"'])
    c.device_slice("gpu-node-1", GPU, [gpu("gpu-0", "a100", 0), gpu("gpu-1", "h100", 1)], "w8n2q")
    # v1: maintenance on gpu-0, picked by driver, pool and device.
    taint_rule(c, "gpu-0-maintenance", "v1", {"device": "gpu-0", "driver": GPU, "pool": "gpu-node-1"},
               "example.com/maintenance", "NoSchedule")
    # v1alpha3 (Kubernetes 1.34): every h100, picked by a CEL selector and the class.
    taint_rule(c, "h100-ecc-errors", "v1alpha3",
               {"deviceClassName": GPU_CLASS,
                "selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "h100"'}}]},
               "example.com/ecc-errors", "NoExecute")
    # v1beta2: informational (effect None) on every device, and a rule without selector (no device).
    taint_rule(c, "all-gpus-firmware-notice", "v1beta2", {}, "example.com/firmware", "None", value="2.1")
    taint_rule(c, "no-selector", "v1", None, "example.com/unused", "NoSchedule")
    maint = {"key": "example.com/maintenance", "operator": "Exists"}
    any_no_schedule = {"effect": "NoSchedule", "operator": "Exists"}
    c.template("ml", "gpu-plain", [gpu_request()])
    c.template("ml", "gpu-tolerates-maintenance", [gpu_request([maint])])
    c.template("ml", "gpu-tolerates-noschedule", [gpu_request([any_no_schedule])])
    c.pod("ml", "plain-0", [("gpu", "template", "gpu-plain")], created=0, app="plain")
    c.pod("ml", "maint-0", [("gpu", "template", "gpu-tolerates-maintenance")], created=1, app="maint")
    c.pod("ml", "noschedule-0", [("gpu", "template", "gpu-tolerates-noschedule")], created=2, app="noschedule")
    write_list(c, name)


# ------------------------------------------------------------------------------------------------
# A recording exactly as kubectl prints a live cluster
# ------------------------------------------------------------------------------------------------
def managed(manager, operation, time, fields, subresource=None):
    m = {"apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": fields, "manager": manager,
         "operation": operation, "time": time}
    if subresource:
        m["subresource"] = subresource
    return m


def kubectl_shaped():
    name = "kubectl-recording-controller-claims-managed-fields"
    c = Cluster(name)
    c.node("node-a")
    c.device_slice("node-a", GPU, [gpu("gpu-0", "a100", 0)], "x7k2m")
    c.node("node-b")
    c.device_slice("node-b", GPU, [gpu("gpu-0", "a100", 0), gpu("gpu-1", "a100", 1)], "q9d4t")
    c.device_class(GPU_CLASS, ['device.driver == "gpu.example.com"'])
    c.template("team", "one-gpu", [gpu_request()])
    # Creation order: zeta-0 (bound earlier), then pending mid-1, alpha-2, beta-3; kubectl prints by name.
    # Claims of the pending pods exist already: the resource-claim controller created them with
    # generateName "<pod>-<entry>-" and recorded the names in status.resourceClaimStatuses.
    suffixes = {"zeta-0": "fz8wd", "mid-1": "k2xq7", "alpha-2": "b5rnt", "beta-3": "m9cvh"}
    created = {"zeta-0": -900, "mid-1": 0, "alpha-2": 1, "beta-3": 2}
    t = c._templates[("team", "one-gpu")]["spec"]["spec"]["devices"]
    for pod, suffix in suffixes.items():
        claim = "%s-gpu-%s" % (pod, suffix)
        bound = pod == "zeta-0"
        alloc = None
        if bound:
            alloc = c.allocation("node-a", [("team", claim, "gpu", GPU, "node-a", "gpu-0", None, False)],
                                 at=created[pod] + 2)
        obj = c.claim("team", claim, t["requests"], created=created[pod] + 1, owner_pod=pod,
                      pod_claim_name="gpu", allocation=alloc, reserved_for=[pod] if bound else None)
        obj["metadata"]["managedFields"] = [managed(
            "kube-controller-manager", "Update", ts(created[pod] + 1),
            {"f:metadata": {"f:annotations": {".": {}, "f:resource.kubernetes.io/pod-claim-name": {}},
                            "f:generateName": {}, "f:ownerReferences": {".": {}, 'k:{"uid":"%s"}' %
                                                                              c.uid_of("Pod", pod, "team"): {}}},
             "f:spec": {"f:devices": {"f:requests": {}}}})]
        obj["metadata"]["managedFields"][0]["apiVersion"] = "resource.k8s.io/v1"
        if bound:
            obj["metadata"]["managedFields"].append(dict(managed(
                "kube-scheduler", "Update", ts(created[pod] + 2),
                {"f:status": {"f:allocation": {".": {}, "f:allocationTimestamp": {}, "f:devices": {},
                                               "f:nodeSelector": {}}, "f:reservedFor": {}}}, "status"),
                apiVersion="resource.k8s.io/v1"))
        p = c.pod("team", pod, [("gpu", "template", "one-gpu")], created[pod], node="node-a" if bound else None,
                  app="gpu-app", generated={"gpu": claim})
        p["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": claim}]
        if not bound:
            p["status"]["conditions"] = [{"lastProbeTime": None, "lastTransitionTime": ts(created[pod] + 1),
                                          "message": "0/2 nodes are available: waiting for resource claims.",
                                          "reason": "Unschedulable", "status": "False", "type": "PodScheduled"}]
        p["metadata"]["managedFields"] = [
            managed("kubectl-create", "Update", ts(created[pod]),
                    {"f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}, "f:image": {}, "f:name": {}}},
                                "f:resourceClaims": {}}}),
            managed("kube-controller-manager", "Update", ts(created[pod] + 1),
                    {"f:status": {"f:resourceClaimStatuses": {}}}, "status"),
        ]
    # Objects of kinds the plugin does not use, as `kubectl get namespaces,events,...` adds them.
    c.items.append({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": c.meta("Namespace", "team", -100000,
                                       labels={"kubernetes.io/metadata.name": "team"}),
                    "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    c.items.append({"apiVersion": "v1", "kind": "Event", "count": 3, "involvedObject": {
        "apiVersion": "v1", "kind": "Pod", "name": "mid-1", "namespace": "team",
        "uid": c.uid_of("Pod", "mid-1", "team")},
        "message": "0/2 nodes are available: waiting for resource claims.", "reason": "FailedScheduling",
        "metadata": c.meta("Event", "mid-1.18a2b3c4d5e6f708", 1, namespace="team"), "type": "Warning"})
    for o in c.items:
        o["metadata"].setdefault("managedFields", [managed(
            "kube-controller-manager" if o["kind"] != "ResourceSlice" else "gpu-driver", "Update",
            o["metadata"]["creationTimestamp"], {"f:metadata": {"f:labels": {}}})])
        if o["kind"] not in ("Node", "Pod", "Namespace", "Event"):
            for m in o["metadata"]["managedFields"]:
                m["apiVersion"] = o["apiVersion"]
    # kubectl get namespaces,nodes,deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates,pods,events
    order = ["Namespace", "Node", "DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate",
             "Pod", "Event"]
    items = sorted(c.items, key=lambda o: (order.index(o["kind"]), o["metadata"].get("namespace", ""),
                                           o["metadata"]["name"]))
    write_list(c, name, items)


def main():
    assert "DeviceTaintRule" in KIND_ORDER
    taint_rules()
    kubectl_shaped()
