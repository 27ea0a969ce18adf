"""Builders for the Kubernetes objects in testdata/*/cluster.json.

Every object is shaped as `kubectl get ... -o json` prints it for resource.k8s.io/v1 and core/v1:
apiVersion and kind on each item, metadata with uid, creationTimestamp and resourceVersion, API
defaults filled in (allocationMode, count, restartPolicy...). Output is deterministic: UIDs and share
IDs are UUIDv5 of the scenario name and the object, timestamps are offsets from a fixed base, so
regenerating a scenario gives a byte-identical file.

Used by gen_scenarios.py (the small hand-derived scenarios) and gen_large.py (the latency cycle).
"""

import datetime
import json
import uuid

BASE_TIME = datetime.datetime(2026, 9, 14, 8, 0, 0, tzinfo=datetime.timezone.utc)

# kubectl prints the kinds in the order they were requested, each sorted by namespace/name.
KIND_ORDER = ["Node", "DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "Pod",
              "DeviceTaintRule"]


def ts(offset_seconds):
    """RFC 3339 time `offset_seconds` after the base time."""
    t = BASE_TIME + datetime.timedelta(seconds=offset_seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def exact(name, device_class, capacity=None, count=1, selectors=None):
    """A `DeviceRequest` with `exactly`, as the API server defaults it."""
    ex = {"allocationMode": "ExactCount", "count": count, "deviceClassName": device_class}
    if capacity:
        ex["capacity"] = {"requests": dict(capacity)}
    if selectors:
        ex["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"exactly": ex, "name": name}


def opaque(driver, parameters, requests=None):
    """A `DeviceClaimConfiguration` with an opaque member."""
    c = {"opaque": {"driver": driver, "parameters": parameters}}
    if requests:
        c["requests"] = list(requests)
    return c


def extractor(cel, selector=None):
    """A KEP-5981 `SharingAffinityExtractor`."""
    e = {"cel": dict(cel)}
    if selector:
        e["selector"] = {"cel": {"expression": selector}}
    return e


def device(name, attributes=None, capacity=None, multi=True):
    """A `Device`. `attributes` values are DeviceAttribute dicts; `capacity` values DeviceCapacity dicts."""
    d = {"name": name}
    if multi:
        d["allowMultipleAllocations"] = True
    if attributes:
        d["attributes"] = attributes
    if capacity:
        d["capacity"] = capacity
    return d


def s(v):
    """A string DeviceAttribute."""
    return {"string": v}


def i(v):
    """An int DeviceAttribute."""
    return {"int": v}


def v(v):
    """A version DeviceAttribute."""
    return {"version": v}


class Cluster:
    """Collects the objects of one scenario and writes them as one `kind: List`."""

    def __init__(self, scenario):
        self.scenario = scenario
        self.items = []
        self.rv = 4000
        self.nodes = {}

    # -- identity -----------------------------------------------------------------------------
    def uid(self, *parts):
        return str(uuid.uuid5(uuid.NAMESPACE_URL, "sharing-affinity-testdata/" + "/".join((self.scenario,) + parts)))

    def share_id(self, claim_ns, claim_name, request, device_name):
        return self.uid("share", claim_ns, claim_name, request, device_name)

    def _next_rv(self):
        self.rv += 7
        return str(self.rv)

    def meta(self, kind, name, created, namespace=None, **extra):
        m = {"creationTimestamp": ts(created), "name": name}
        if namespace:
            m["namespace"] = namespace
        m["resourceVersion"] = self._next_rv()
        m["uid"] = self.uid(kind, namespace or "", name)
        m.update(extra)
        return dict(sorted(m.items()))

    def uid_of(self, kind, name, namespace=None):
        return self.uid(kind, namespace or "", name)

    # -- objects ------------------------------------------------------------------------------
    def node(self, name, created=-86400, labels=None, instance_type="m6i.4xlarge", zone="zone-a"):
        lab = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": instance_type,
            "topology.kubernetes.io/zone": zone,
        }
        lab.update(labels or {})
        obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": self.meta("Node", name, created, labels=dict(sorted(lab.items())),
                                  annotations={"node.alpha.kubernetes.io/ttl": "0",
                                               "volumes.kubernetes.io/controller-managed-attach-detach": "true"}),
            "spec": {"podCIDR": "10.244.%d.0/24" % (len(self.nodes) + 1),
                     "podCIDRs": ["10.244.%d.0/24" % (len(self.nodes) + 1)]},
            "status": {
                "addresses": [{"address": "192.168.10.%d" % (len(self.nodes) + 11), "type": "InternalIP"},
                              {"address": name, "type": "Hostname"}],
                "allocatable": {"cpu": "16", "ephemeral-storage": "95500736762", "memory": "64917460Ki", "pods": "110"},
                "capacity": {"cpu": "16", "ephemeral-storage": "103625820Ki", "memory": "65019860Ki", "pods": "110"},
                "conditions": [{"lastHeartbeatTime": ts(-60), "lastTransitionTime": ts(created + 40),
                                "message": "kubelet is posting ready status", "reason": "KubeletReady",
                                "status": "True", "type": "Ready"}],
                "nodeInfo": {"architecture": "amd64", "containerRuntimeVersion": "containerd://2.1.4",
                             "kernelVersion": "6.8.0-71-generic", "kubeProxyVersion": "", "kubeletVersion": "v1.36.2",
                             "operatingSystem": "linux", "osImage": "Ubuntu 24.04.3 LTS"},
            },
        }
        self.nodes[name] = obj
        self.items.append(obj)
        return obj

    def device_class(self, name, selectors, created=-80000):
        obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": self.meta("DeviceClass", name, created, generation=1),
            "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]},
        }
        self.items.append(obj)
        return obj

    def _slice(self, node, driver, pool, name, count, generation, created, body):
        node_uid = self.uid_of("Node", node)
        spec = {"driver": driver, "nodeName": node,
                "pool": {"generation": generation, "name": pool, "resourceSliceCount": count}}
        spec.update(body)
        obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": self.meta("ResourceSlice", name, created, generation=1,
                                  generateName=name[:-5],
                                  ownerReferences=[{"apiVersion": "v1", "controller": True, "kind": "Node",
                                                    "name": node, "uid": node_uid}]),
            "spec": dict(sorted(spec.items())),
        }
        self.items.append(obj)
        return obj

    def device_slice(self, node, driver, devices, suffix, pool=None, count=1, generation=1, created=-70000):
        """A node-local slice with devices. Name `<node>-<driver>-<suffix>` (suffix: 5 chars)."""
        assert len(suffix) == 5
        return self._slice(node, driver, pool or node, "%s-%s-%s" % (node, driver, suffix), count, generation,
                           created, {"devices": devices})

    def affinity_slice(self, node, driver, extractors, suffix, pool=None, count=2, generation=1, created=-70000):
        """A KEP-5981 metadata slice: no devices, only `sharingAffinity`, in the same pool."""
        assert len(suffix) == 5
        return self._slice(node, driver, pool or node, "%s-%s-%s" % (node, driver, suffix), count, generation,
                           created, {"sharingAffinity": extractors})

    def template(self, namespace, name, requests, config=None, created=-3600):
        spec = {"devices": {"requests": requests}}
        if config:
            spec["devices"]["config"] = config
        obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": self.meta("ResourceClaimTemplate", name, created, namespace=namespace),
            "spec": {"metadata": {}, "spec": spec},
        }
        self.items.append(obj)
        self._templates = getattr(self, "_templates", {})
        self._templates[(namespace, name)] = obj
        return obj

    def claim(self, namespace, name, requests, config=None, created=-1800, owner_pod=None, pod_claim_name=None,
              allocation=None, reserved_for=None):
        spec = {"devices": {"requests": requests}}
        if config:
            spec["devices"]["config"] = config
        extra = {}
        if owner_pod:
            extra["ownerReferences"] = [{"apiVersion": "v1", "blockOwnerDeletion": True, "controller": True,
                                         "kind": "Pod", "name": owner_pod,
                                         "uid": self.uid_of("Pod", owner_pod, namespace)}]
            extra["annotations"] = {"resource.kubernetes.io/pod-claim-name": pod_claim_name}
            extra["generateName"] = "%s-%s-" % (owner_pod, pod_claim_name)
        if allocation:
            extra["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        status = {}
        if allocation:
            status["allocation"] = allocation
        if reserved_for:
            status["reservedFor"] = [{"name": p, "resource": "pods", "uid": self.uid_of("Pod", p, namespace)}
                                     for p in reserved_for]
        obj = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": self.meta("ResourceClaim", name, created, namespace=namespace, **extra),
            "spec": spec,
            "status": status,
        }
        self.items.append(obj)
        return obj

    def allocation(self, node, results, config=None, at=-1700):
        """`status.allocation` for a node-local allocation.

        results: (claim_ns, claim_name, request, driver, pool, device, consumed dict or None, shared bool)
        config: the claim's config entries, copied as FromClaim (requests kept only when set).
        """
        res = []
        for (cns, cname, request, driver, pool, dev, consumed, shared) in results:
            r = {"device": dev, "driver": driver, "pool": pool, "request": request}
            if shared:
                r["shareID"] = self.share_id(cns, cname, request, dev)
                if consumed is not None:
                    r["consumedCapacity"] = dict(consumed)
            res.append(r)
        devices = {"results": res}
        if config:
            devices["config"] = [dict({"source": "FromClaim"}, **c) for c in config]
        return {
            "allocationTimestamp": ts(at),
            "devices": devices,
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
        }

    def claim_from_template(self, namespace, pod, entry, template, allocation, created=-1800):
        """The claim the resourceclaim controller generated for a bound pod: `<pod>-<entry>`."""
        t = self._templates[(namespace, template)]["spec"]["spec"]["devices"]
        return self.claim(namespace, "%s-%s" % (pod, entry), t["requests"], t.get("config"), created=created,
                          owner_pod=pod, pod_claim_name=entry, allocation=allocation, reserved_for=[pod])

    def pod(self, namespace, name, claims, created, node=None, image="registry.example.com/app:1.0.0",
            app=None, generated=None):
        """A pod. claims: list of (entry, "template"|"claim", name). node set = bound and Running.

        generated: for bound pods, entry -> generated claim name (pod.status.resourceClaimStatuses).
        """
        rc = []
        for (entry, src, ref) in claims:
            e = {"name": entry}
            if src == "template":
                e["resourceClaimTemplateName"] = ref
            else:
                e["resourceClaimName"] = ref
            rc.append(e)
        container = {
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "name": "main",
            "resources": {"claims": [{"name": entry} for (entry, _, _) in claims]},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                              "name": "kube-api-access", "readOnly": True}],
        }
        spec = {
            "containers": [container],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "resourceClaims": rc,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "tolerationSeconds": 300},
                {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
                 "tolerationSeconds": 300}],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}],
        }
        if node:
            spec["nodeName"] = node
            n = list(self.nodes).index(node) if node in self.nodes else 0
            status = {
                "conditions": [
                    {"lastProbeTime": None, "lastTransitionTime": ts(created + 2), "status": "True",
                     "type": "PodScheduled"},
                    {"lastProbeTime": None, "lastTransitionTime": ts(created + 9), "status": "True",
                     "type": "Ready"}],
                "containerStatuses": [{"containerID": "containerd://" + self.uid("ctr", namespace, name).replace("-", ""),
                                       "image": image, "imageID": image, "lastState": {}, "name": "main",
                                       "ready": True, "restartCount": 0, "started": True,
                                       "state": {"running": {"startedAt": ts(created + 8)}}}],
                "hostIP": "192.168.10.%d" % (n + 11),
                "phase": "Running",
                "podIP": "10.244.%d.%d" % (n + 1, 10 + (int(self.uid("ip", namespace, name)[:2], 16) % 200)),
                "qosClass": "BestEffort",
                "startTime": ts(created + 2),
            }
            if generated:
                status["resourceClaimStatuses"] = [{"name": e, "resourceClaimName": c} for e, c in generated.items()]
        else:
            status = {"phase": "Pending", "qosClass": "BestEffort"}
        labels = {"app.kubernetes.io/name": app or name.rsplit("-", 1)[0]}
        obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": self.meta("Pod", name, created, namespace=namespace, labels=labels),
            "spec": spec,
            "status": status,
        }
        self.items.append(obj)
        return obj

    # -- output -------------------------------------------------------------------------------
    def document(self):
        def key(o):
            m = o["metadata"]
            return (KIND_ORDER.index(o["kind"]), m.get("namespace", ""), m["name"])

        items = sorted(self.items, key=key)
        return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}

    def write(self, path):
        with open(path, "w") as f:
            json.dump(self.document(), f, indent=2)
            f.write("\n")
