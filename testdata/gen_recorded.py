"""Scenarios shaped like recordings of real clusters (issue 12): DeviceTaintRules, a cycle
exactly as `kubectl get ... -A -o json` prints a live cluster (managedFields, API-server defaults,
claims the resource-claim controller already created with random suffixes, kubectl's order), and
KEP-5004 extended resources backed by DRA next to a device plugin.

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


# ------------------------------------------------------------------------------------------------
# KEP-5004: extended resources backed by DRA, with a node that also has a device plugin
# ------------------------------------------------------------------------------------------------
EXT_GPU = "example.com/gpu"
FPGA = "fpga.example.com"
IMPLICIT = "deviceclass.resource.kubernetes.io/"
# The annotation that marks the claim the scheduler creates for a pod's extended resources.
EXT_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def ext_container(name, requests):
    """A container asking for resources; the API server copies an extended resource's limit into
    its requests, so kubectl prints both."""
    ext = {k: v for k, v in requests.items() if "/" in k}
    return {"image": "registry.example.com/ml:2.4.0", "imagePullPolicy": "IfNotPresent", "name": name,
            "resources": {"limits": dict(sorted(ext.items())), "requests": dict(sorted(requests.items()))},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}


def ext_pod(c, ns, name, containers, created, node=None):
    p = c.pod(ns, name, [], created, node=node, image="registry.example.com/ml:2.4.0", app="ml")
    del p["spec"]["resourceClaims"]
    p["spec"]["containers"] = containers
    p["status"]["qosClass"] = "Burstable"
    if node:
        p["status"]["containerStatuses"] = [dict(p["status"]["containerStatuses"][0], name=ct["name"])
                                            for ct in containers]
    return p


def extended_resources():
    name = "extended-resources-dra-class-device-plugin-node"
    c = Cluster(name)
    c.node("gpu-node-1")
    n2 = c.node("gpu-node-2")
    # gpu-node-2 also runs a device plugin for example.com/gpu: kubelet lists it in the node status.
    for k in ("allocatable", "capacity"):
        n2["status"][k][EXT_GPU] = "2"
        n2["status"][k] = dict(sorted(n2["status"][k].items()))
    cls = c.device_class(GPU_CLASS, ['device.driver == "gpu.example.com"',
                                     'device.attributes["gpu.example.com"].model == "a100"'])
    cls["spec"]["extendedResourceName"] = EXT_GPU
    c.device_class(FPGA, ['device.driver == "fpga.example.com"'])
    c.device_slice("gpu-node-1", GPU, [gpu("gpu-0", "a100", 0), gpu("gpu-1", "h100", 1), gpu("gpu-2", "a100", 2),
                                       gpu("gpu-3", "a100", 3), gpu("gpu-4", "a100", 4)], "r7t2k")
    c.device_slice("gpu-node-2", GPU, [gpu("gpu-0", "a100", 0)], "h5w9d")
    c.device_slice("gpu-node-2", FPGA, [device("fpga-0", attributes={FPGA + "/family": s("agilex")},
                                               multi=False)], "c3n8v")
    # serve-0 runs on gpu-node-1 with gpu-0, through the claim the scheduler created for it. The
    # request is named by the container's index and the resource's index among its sorted
    # requests (cpu is 0).
    claim = "serve-0-extended-resources-x4k9p"
    request = {"exactly": {"allocationMode": "ExactCount", "count": 1, "deviceClassName": GPU_CLASS},
               "name": "container-0-request-1"}
    alloc = c.allocation("gpu-node-1", [("ml", claim, "container-0-request-1", GPU, "gpu-node-1", "gpu-0",
                                         None, False)], at=-1198)
    obj = c.claim("ml", claim, [request], created=-1199, allocation=alloc, reserved_for=["serve-0"])
    meta = obj["metadata"]
    meta["annotations"] = {EXT_ANNOTATION: "true"}
    meta["generateName"] = "serve-0-extended-resources-"
    meta["ownerReferences"] = [{"apiVersion": "v1", "blockOwnerDeletion": True, "controller": True,
                                "kind": "Pod", "name": "serve-0", "uid": c.uid_of("Pod", "serve-0", "ml")}]
    obj["metadata"] = dict(sorted(meta.items()))
    p = ext_pod(c, "ml", "serve-0", [ext_container("main", {"cpu": "1", EXT_GPU: "1"})], -1200, node="gpu-node-1")
    p["status"]["extendedResourceClaimStatus"] = {
        "requestMappings": [{"containerName": "main", "requestName": "container-0-request-1",
                             "resourceName": EXT_GPU}],
        "resourceClaimName": claim}
    ext_pod(c, "ml", "train-1", [ext_container("main", {"cpu": "2", EXT_GPU: "2"}),
                                 ext_container("logger", {EXT_GPU: "1"})], 0)
    ext_pod(c, "ml", "infer-2", [ext_container("main", {EXT_GPU: "1"})], 1)
    ext_pod(c, "ml", "mixed-3", [ext_container("main", {EXT_GPU: "1", IMPLICIT + FPGA: "1"})], 2)
    ext_pod(c, "ml", "implicit-4", [ext_container("main", {IMPLICIT + GPU_CLASS: "1"})], 3)
    write_list(c, name)


def main():
    assert "DeviceTaintRule" in KIND_ORDER
    taint_rules()
    kubectl_shaped()
    extended_resources()
