"""Offline checks of Noema's deployment files: the Helm chart and the kustomize renders.

Run by scripts/lib/deploy_checks.sh (run_deploy_checks) inside its pinned virtualenv:

    python chart_assertions.py --chart helm/noema --kube-version 1.29 --kube-version 1.37 \
        [--manifests NAME=FILE ...]

For the chart, in both modes and with every values file in <chart>/ci:
  * helm lint (Helm SDK via helm-python-sdk, strict: warnings fail) and values.schema.json;
  * helm template; every rendered document must be YAML without duplicate keys (yamllint)
    and pass kubernetes-validate --strict for every --kube-version;
  * the chart's promises (see check_chart): one Deployment per enabled service plus the
    gateway, or one single-replica StatefulSet; probes; security contexts; secrets only
    through secretKeyRef; a migration hook; config checksums that roll pods; consistent
    selectors, ports, NetworkPolicies, PDBs, HPAs and ServiceMonitors;
  * values that must be refused are refused (split without a Secret, bad mode, …).
For each --manifests file (a `kubectl kustomize` output): YAML, kubernetes-validate
--strict, and the same workload rules (security context, probes, no plain secrets except
Secrets marked dev-only in a dev overlay).
Against the binary's service registry (--registry, the output of `noema services --json`):
the chart's `services` values (grpcService, database, objectStore, calls, ownerToken) and
the k8s dev overlay (database URLs, databases created, object store URLs) name exactly the
registered services, with the same storage and peers; mutated registries and values prove
that a drift either way is caught.

Exit status 0 when everything holds, 1 otherwise; every failure is printed.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import re
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import helm_python as helm
import kubernetes_validate.utils as kv
import yaml
from packaging.version import Version
from yamllint import linter as yamllint_linter
from yamllint.config import YamlLintConfig

# Kinds without a schema in kubernetes-validate (CRDs), checked by hand below.
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"}
LONG_RUNNING = {"Deployment", "StatefulSet", "DaemonSet"}
# Env var names that must never carry a literal value.
SECRET_NAME = re.compile(
    r"PASSWORD|PASSWD|SECRET|TOKEN|CREDENTIAL|PRIVATE|ACCESS_KEY|API_KEY|DATABASE_URL|_DSN$",
    re.IGNORECASE,
)
# A URL with a password in it: scheme://user:password@host
URL_WITH_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@", re.IGNORECASE)
DEV_ONLY_ANNOTATION = "noema.dev/dev-only"
RENDERED_YAMLLINT = YamlLintConfig(
    "rules:\n  key-duplicates: enable\n  anchors: enable\n  truthy: disable\n"
)


class Failures:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.context = ""

    def add(self, message: str) -> None:
        self.items.append(f"{self.context}: {message}" if self.context else message)

    def check(self, condition: Any, message: str) -> bool:
        if not condition:
            self.add(message)
        return bool(condition)


# --- kubernetes-validate, with its schema files parsed once --------------------------------

_schema_contents = functools.lru_cache(maxsize=None)(kv.schema_contents)
kv.schema_contents = _schema_contents  # kv.validate looks it up at call time


def supported_version(version: str) -> str:
    latest = Version(kv.latest_version())
    if Version(version) > latest:
        raise SystemExit(
            f"kubernetes-validate {kv.__version__} knows Kubernetes up to {latest}, not {version}"
        )
    return version


def validate_schema(doc: dict, versions: list[str], fail: Failures, where: str) -> None:
    key = (doc.get("apiVersion"), doc.get("kind"))
    if key in CRD_KINDS:
        check_crd(doc, fail, where)
        return
    for version in versions:
        try:
            kv.validate(doc, version, strict=True)
        except kv.ValidationError as err:
            path = ".".join(str(p) for p in err.path) or "(document)"
            fail.add(f"{where}: not valid for Kubernetes {version} (strict): {path}: {err.message}")
            return
        except kv.SchemaNotFoundError as err:
            fail.add(f"{where}: {err.message} (unknown kind or apiVersion)")
            return


def check_crd(doc: dict, fail: Failures, where: str) -> None:
    """ServiceMonitor has no schema here: check the fields the chart uses."""
    spec = doc.get("spec") or {}
    fail.check(doc.get("metadata", {}).get("name"), f"{where}: metadata.name missing")
    fail.check(
        isinstance(spec.get("selector", {}).get("matchLabels"), dict),
        f"{where}: spec.selector.matchLabels missing",
    )
    endpoints = spec.get("endpoints")
    if fail.check(isinstance(endpoints, list) and endpoints, f"{where}: spec.endpoints missing"):
        for ep in endpoints:
            fail.check(
                set(ep) <= {"port", "path", "interval", "scrapeTimeout", "scheme"},
                f"{where}: unexpected endpoint fields {sorted(set(ep))}",
            )
            fail.check(ep.get("port"), f"{where}: endpoint without a port name")


# --- YAML ---------------------------------------------------------------------------------


def parse_documents(text: str, fail: Failures, where: str) -> list[dict]:
    for problem in yamllint_linter.run(text, RENDERED_YAMLLINT):
        if problem.level == "error":
            rule = f" ({problem.rule})" if problem.rule else ""
            fail.add(f"{where}:{problem.line}:{problem.column}: {problem.desc}{rule}")
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        fail.add(f"{where}: not YAML: {err}")
        return []
    out = []
    for doc in docs:
        if not isinstance(doc, dict):
            fail.add(f"{where}: a document is not a mapping: {str(doc)[:80]!r}")
            continue
        for field in ("apiVersion", "kind"):
            fail.check(doc.get(field), f"{where}: a document has no {field}")
        fail.check((doc.get("metadata") or {}).get("name"), f"{where}: a {doc.get('kind')} has no metadata.name")
        out.append(doc)
    return out


# --- generic rules (chart and kustomize) -----------------------------------------------------


def name_of(doc: dict) -> str:
    return f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"


def pod_spec(doc: dict) -> dict | None:
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "CronJob":
        return spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
    if kind in WORKLOAD_KINDS:
        return spec.get("template", {}).get("spec")
    if kind == "Pod":
        return spec
    return None


def pod_template_meta(doc: dict) -> dict:
    return (doc.get("spec") or {}).get("template", {}).get("metadata") or {}


def containers(spec: dict) -> Iterator[tuple[str, dict]]:
    for field in ("initContainers", "containers"):
        for c in spec.get(field) or []:
            yield field, c


def check_workload(doc: dict, fail: Failures, probes_required: bool = True) -> None:
    where = name_of(doc)
    spec = pod_spec(doc)
    if spec is None:
        return
    psc = spec.get("securityContext") or {}
    fail.check(spec.get("automountServiceAccountToken") is False, f"{where}: automountServiceAccountToken is not false")
    fail.check(not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC"),
               f"{where}: uses host namespaces")
    volumes = {v.get("name"): v for v in spec.get("volumes") or []}
    claim_templates = {
        (t.get("metadata") or {}).get("name")
        for t in (doc.get("spec") or {}).get("volumeClaimTemplates") or []
    }
    for field, c in containers(spec):
        cw = f"{where} {field[:-1]} {c.get('name')}"
        sc = c.get("securityContext")
        if not fail.check(isinstance(sc, dict), f"{cw}: no securityContext"):
            continue
        fail.check(sc.get("allowPrivilegeEscalation") is False, f"{cw}: allowPrivilegeEscalation is not false")
        fail.check(sc.get("readOnlyRootFilesystem") is True, f"{cw}: readOnlyRootFilesystem is not true")
        fail.check(not sc.get("privileged"), f"{cw}: privileged")
        fail.check("ALL" in ((sc.get("capabilities") or {}).get("drop") or []), f"{cw}: capabilities.drop lacks ALL")
        fail.check(sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, f"{cw}: runAsNonRoot is not true")
        uid = sc.get("runAsUser", psc.get("runAsUser"))
        fail.check(uid is None or uid != 0, f"{cw}: runs as uid 0")
        seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
        fail.check(seccomp == "RuntimeDefault", f"{cw}: seccompProfile is not RuntimeDefault")
        fail.check((c.get("resources") or {}).get("requests"), f"{cw}: no resource requests")
        if probes_required and field == "containers" and doc["kind"] in LONG_RUNNING:
            for probe in ("livenessProbe", "readinessProbe"):
                fail.check(isinstance(c.get(probe), dict), f"{cw}: no {probe}")
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            grpc = (c.get(probe) or {}).get("grpc")
            if grpc is not None:
                fail.check(
                    grpc.get("port") in [p.get("containerPort") for p in c.get("ports") or []],
                    f"{cw}: {probe} gRPC port {grpc.get('port')} is not a container port",
                )
        for mount in c.get("volumeMounts") or []:
            fail.check(
                mount.get("name") in volumes or mount.get("name") in claim_templates,
                f"{cw}: volumeMount {mount.get('name')} has no volume",
            )
        check_env(c, fail, cw)


def check_env(c: dict, fail: Failures, where: str) -> None:
    for env in c.get("env") or []:
        name = env.get("name", "")
        if "value" in env:
            value = str(env.get("value"))
            fail.check(not SECRET_NAME.search(name), f"{where}: env {name} has a literal value (use secretKeyRef)")
            fail.check(not URL_WITH_PASSWORD.search(value), f"{where}: env {name} holds a URL with a password")


def check_no_plain_secrets(docs: list[dict], fail: Failures, allow_dev_secrets: bool) -> None:
    for doc in docs:
        where = name_of(doc)
        if doc.get("kind") == "Secret":
            annotations = (doc.get("metadata") or {}).get("annotations") or {}
            fail.check(
                allow_dev_secrets and annotations.get(DEV_ONLY_ANNOTATION) == "true",
                f"{where}: a Secret is rendered (secrets must come from an existing Secret;"
                f" only dev overlays may generate one, annotated {DEV_ONLY_ANNOTATION}: \"true\")",
            )
            continue
        if doc.get("kind") == "ConfigMap":
            for key, value in (doc.get("data") or {}).items():
                fail.check(not SECRET_NAME.search(key), f"{where}: ConfigMap key {key} looks like a secret")
                fail.check(not URL_WITH_PASSWORD.search(str(value)), f"{where}: ConfigMap {key} holds a URL with a password")


def selector_matches(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_references(docs: list[dict], fail: Failures) -> None:
    """Services, PDBs, HPAs, NetworkPolicies and ServiceMonitors point at real things."""
    workloads = [d for d in docs if d.get("kind") in LONG_RUNNING]
    configmaps = {d["metadata"]["name"] for d in docs if d.get("kind") == "ConfigMap"}
    services = [d for d in docs if d.get("kind") == "Service"]

    def pods_selected(selector: dict) -> list[dict]:
        return [w for w in workloads if selector_matches(selector, pod_template_meta(w).get("labels") or {})]

    for w in workloads:
        labels = pod_template_meta(w).get("labels") or {}
        fail.check(
            selector_matches(w["spec"].get("selector", {}).get("matchLabels") or {}, labels),
            f"{name_of(w)}: selector does not match its pod labels",
        )
        for _, c in containers(pod_spec(w) or {}):
            for source in c.get("envFrom") or []:
                ref = (source.get("configMapRef") or {}).get("name")
                if ref:
                    fail.check(ref in configmaps, f"{name_of(w)}: envFrom ConfigMap {ref} is not rendered")
    for svc in services:
        selected = pods_selected(svc["spec"].get("selector") or {})
        if not fail.check(len(selected) == 1, f"{name_of(svc)}: selects {len(selected)} workloads, not 1"):
            continue
        port_names = {
            p.get("name")
            for _, c in containers(pod_spec(selected[0]) or {})
            for p in c.get("ports") or []
        }
        for port in svc["spec"].get("ports") or []:
            target = port.get("targetPort")
            if isinstance(target, str):
                fail.check(target in port_names, f"{name_of(svc)}: targetPort {target} is not a container port")
    for pdb in (d for d in docs if d.get("kind") == "PodDisruptionBudget"):
        fail.check(pods_selected(pdb["spec"]["selector"].get("matchLabels") or {}), f"{name_of(pdb)}: selects no pods")
    for hpa in (d for d in docs if d.get("kind") == "HorizontalPodAutoscaler"):
        ref = hpa["spec"]["scaleTargetRef"]
        targets = [w for w in workloads if w["kind"] == ref["kind"] and w["metadata"]["name"] == ref["name"]]
        if fail.check(targets, f"{name_of(hpa)}: scale target {ref['kind']}/{ref['name']} is not rendered"):
            fail.check("replicas" not in targets[0]["spec"], f"{name_of(targets[0])}: sets replicas although an HPA scales it")
    for np in (d for d in docs if d.get("kind") == "NetworkPolicy"):
        if (np.get("metadata", {}).get("annotations") or {}).get("helm.sh/hook"):
            continue
        fail.check(pods_selected(np["spec"]["podSelector"].get("matchLabels") or {}), f"{name_of(np)}: selects no pods")
    for sm in (d for d in docs if d.get("kind") == "ServiceMonitor"):
        matched = [s for s in services if selector_matches(sm["spec"]["selector"]["matchLabels"], s["metadata"].get("labels") or {})]
        if fail.check(len(matched) == 1, f"{name_of(sm)}: selects {len(matched)} Services, not 1"):
            names = {p.get("name") for p in matched[0]["spec"]["ports"]}
            for ep in sm["spec"]["endpoints"]:
                fail.check(ep["port"] in names, f"{name_of(sm)}: port {ep['port']} is not a port of {name_of(matched[0])}")


# --- the chart ------------------------------------------------------------------------------


def deep_merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class Chart:
    def __init__(self, path: Path, versions: list[str]) -> None:
        self.path = path
        self.versions = versions
        self.chart = helm.Chart.load(str(path))
        self.defaults = self.chart.values

    def lint(self, values: dict, fail: Failures) -> None:
        for version in self.versions:
            report = helm.lint(str(self.path), values, strict=True, kube_version=f"v{version}.0")
            problems = [
                f"{msg.get('path')}: {str(msg.get('error')).strip()}"
                for msg in report.get("messages", [])
                if msg.get("severity", 0) >= 2
            ]
            if not problems:
                problems = [str(err).strip() for err in report.get("errors", [])]
            for problem in dict.fromkeys(problems):
                fail.add(f"helm lint (Kubernetes {version}): {problem}")

    def render(self, values: dict, release: str = "noema", namespace: str = "noema") -> dict[str, str]:
        self.chart.validate_schema(values)
        return self.chart.render(values, name=release, namespace=namespace, is_install=True)

    def documents(self, rendered: dict[str, str], fail: Failures) -> tuple[list[dict], str]:
        docs: list[dict] = []
        notes = ""
        for template, text in sorted(rendered.items()):
            if template.endswith("NOTES.txt"):
                notes = text
                continue
            if not text.strip():
                continue
            docs.extend(parse_documents(text, fail, template))
        return docs, notes


def component_name(fullname: str, component: str) -> str:
    return f"{fullname}-{component}"[:63].rstrip("-")


def fullname_for(release: str, values: dict) -> str:
    if values.get("fullnameOverride"):
        return values["fullnameOverride"][:50].rstrip("-")
    name = values.get("nameOverride") or "noema"
    return (release if name in release else f"{release}-{name}")[:50].rstrip("-")


def effective_services(values: dict) -> dict[str, dict]:
    """The enabled services with serviceDefaults applied (as the chart's noema.services)."""
    defaults = values.get("serviceDefaults") or {}
    out = {}
    for name, entry in (values.get("services") or {}).items():
        entry = entry or {}
        if not entry.get("enabled", defaults.get("enabled", True)):
            continue
        merged = {}
        for key, value in defaults.items():
            if key not in entry:
                merged[key] = copy.deepcopy(value)
            elif isinstance(value, dict) and isinstance(entry[key], dict):
                merged[key] = {**value, **entry[key]}
            else:
                merged[key] = entry[key]
        for key, value in entry.items():
            merged.setdefault(key, value)
        out[name] = merged
    return out


def check_chart(docs: list[dict], notes: str, values: dict, release: str, fail: Failures) -> None:
    """The chart's promises, given the merged values it was rendered with."""
    by_kind: dict[str, list[dict]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    fullname = fullname_for(release, values)
    deployments = {d["metadata"]["name"]: d for d in by_kind.get("Deployment", [])}
    statefulsets = by_kind.get("StatefulSet", [])
    images = set()

    check_no_plain_secrets(docs, fail, allow_dev_secrets=False)
    for doc in docs:
        if doc["kind"] in WORKLOAD_KINDS:
            check_workload(doc, fail)
            for _, c in containers(pod_spec(doc) or {}):
                images.add(c.get("image"))
            meta = pod_template_meta(doc)
            if doc["kind"] in LONG_RUNNING:
                fail.check((meta.get("annotations") or {}).get("checksum/config"), f"{name_of(doc)}: no checksum/config annotation")
            spec = pod_spec(doc) or {}
            fail.check(spec.get("enableServiceLinks") is False, f"{name_of(doc)}: enableServiceLinks is not false (NOEMA_* service env vars)")
            for _, c in containers(spec):
                mounts = {m.get("mountPath") for m in c.get("volumeMounts") or []}
                fail.check("/tmp" in mounts, f"{name_of(doc)} {c.get('name')}: no writable /tmp (emptyDir)")
    fail.check(len(images) == 1, f"containers use {len(images)} images, expected one: {sorted(map(str, images))}")
    check_references(docs, fail)

    if values["mode"] == "split":
        services = effective_services(values)
        enabled = sorted(services)
        expected = {component_name(fullname, n) for n in enabled} | {component_name(fullname, "gateway")}
        fail.check(set(deployments) == expected,
                   f"split: Deployments {sorted(deployments)} != one per enabled service + gateway {sorted(expected)}")
        fail.check(not statefulsets and not by_kind.get("PersistentVolumeClaim"), "split: renders a StatefulSet or PVC")
        secret_name = values["secrets"]["existingSecret"]
        for name in enabled:
            svc = services[name]
            dep = deployments.get(component_name(fullname, name))
            if dep is None:
                continue
            c = dep["spec"]["template"]["spec"]["containers"][0]
            fail.check(c.get("args") == ["serve", name], f"{name_of(dep)}: args {c.get('args')} != ['serve', '{name}']")
            fail.check(((c.get("livenessProbe") or {}).get("grpc") or {}).get("service") == "",
                       f"{name_of(dep)}: liveness is not gRPC health of the server (\"\")")
            fail.check(((c.get("readinessProbe") or {}).get("grpc") or {}).get("service") == svc["grpcService"],
                       f"{name_of(dep)}: readiness is not gRPC health of {svc['grpcService']}")
            env = {e["name"]: e for e in c.get("env") or []}
            db_var = f"NOEMA__{name.upper()}__DATABASE_URL"
            if svc.get("database"):
                ref = (env.get(db_var, {}).get("valueFrom") or {}).get("secretKeyRef") or {}
                fail.check(ref.get("name") == secret_name, f"{name_of(dep)}: {db_var} is not read from Secret {secret_name}")
            if svc.get("ownerToken"):
                ref = (env.get("NOEMA__AUTH__OWNER_TOKEN_SHA256", {}).get("valueFrom") or {}).get("secretKeyRef") or {}
                fail.check(ref.get("name") == secret_name, f"{name_of(dep)}: the owner token hash is not read from the Secret")
            cm = next((d for d in by_kind.get("ConfigMap", []) if d["metadata"]["name"] == component_name(fullname, name)), {})
            data = cm.get("data") or {}
            for peer in svc.get("calls") or []:
                fail.check(data.get(f"NOEMA__ENDPOINTS__{peer.upper()}", "").startswith(f"http://{component_name(fullname, peer)}:"),
                           f"{name_of(dep)}: no endpoint for {peer}")
            if svc.get("objectStore"):
                fail.check(data.get(f"NOEMA__{name.upper()}__OBJECT_STORE_URL", "").startswith("s3://"), f"{name_of(dep)}: no s3:// object store")
        gw = deployments.get(component_name(fullname, "gateway"))
        if gw is not None:
            c = gw["spec"]["template"]["spec"]["containers"][0]
            fail.check(c.get("args") == ["serve", "gateway"], f"{name_of(gw)}: args {c.get('args')}")
            fail.check(((c.get("readinessProbe") or {}).get("httpGet") or {}).get("path") == "/readyz", f"{name_of(gw)}: readiness is not /readyz")
            fail.check(((c.get("livenessProbe") or {}).get("httpGet") or {}).get("path") == "/healthz", f"{name_of(gw)}: liveness is not /healthz")
            cm = next((d for d in by_kind.get("ConfigMap", []) if d["metadata"]["name"] == component_name(fullname, "gateway")), {})
            for name in enabled:
                fail.check(f"NOEMA__ENDPOINTS__{name.upper()}" in (cm.get("data") or {}), f"gateway: no endpoint for {name}")
        # Migration hook.
        db_services = sorted(n for n in enabled if services[n].get("database"))
        jobs = by_kind.get("Job", [])
        if values["migrations"]["enabled"] and db_services:
            if fail.check(len(jobs) == 1, f"split: {len(jobs)} migration Jobs, expected 1"):
                job = jobs[0]
                hooks = set(((job["metadata"].get("annotations") or {}).get("helm.sh/hook") or "").split(","))
                fail.check({"pre-install", "pre-upgrade"} <= hooks, f"{name_of(job)}: not a pre-install,pre-upgrade hook")
                c = job["spec"]["template"]["spec"]["containers"][0]
                fail.check(c.get("args") == ["migrate", *db_services], f"{name_of(job)}: args {c.get('args')} != migrate {db_services}")
                fail.check(not job["spec"]["template"]["spec"].get("serviceAccountName") or not values["serviceAccount"]["create"],
                           f"{name_of(job)}: a pre-install hook cannot use the ServiceAccount the release creates later")
        else:
            fail.check(not jobs, "split: a migration Job although migrations are off or no service has a database")
        # PDBs and HPAs follow the values.
        pdbs = {d["metadata"]["name"] for d in by_kind.get("PodDisruptionBudget", [])}
        hpas = {d["metadata"]["name"] for d in by_kind.get("HorizontalPodAutoscaler", [])}
        for comp, cfg in [(n, services[n]) for n in enabled] + [("gateway", values["gateway"])]:
            cname = component_name(fullname, comp)
            fail.check((cname in pdbs) == bool(cfg["pdb"]["enabled"]), f"{cname}: PodDisruptionBudget does not follow pdb.enabled")
            fail.check((cname in hpas) == bool(cfg["autoscaling"]["enabled"]), f"{cname}: HPA does not follow autoscaling.enabled")
        # NetworkPolicies: services reachable only from their callers, the gateway from outside.
        if values["networkPolicy"]["enabled"]:
            policies = {d["metadata"]["name"]: d for d in by_kind.get("NetworkPolicy", [])}
            for comp in enabled + ["gateway"]:
                np = policies.get(component_name(fullname, comp))
                if not fail.check(np, f"split: no NetworkPolicy for {comp}"):
                    continue
                fail.check(set(np["spec"].get("policyTypes") or []) == {"Ingress", "Egress"}, f"{name_of(np)}: not both Ingress and Egress")
                for rule in np["spec"].get("ingress") or []:
                    ports = {p.get("port") for p in rule.get("ports") or []}
                    fail.check(ports, f"{name_of(np)}: an ingress rule opens every port")
                    if comp != "gateway" and "grpc" in ports:
                        fail.check(rule.get("from"), f"{name_of(np)}: gRPC is open to everyone")
                egress_pods = {
                    (peer.get("podSelector") or {}).get("matchLabels", {}).get("app.kubernetes.io/component")
                    for rule in np["spec"].get("egress") or []
                    for peer in rule.get("to") or []
                }
                wanted = set(enabled) if comp == "gateway" else set(services[comp].get("calls") or [])
                fail.check(wanted <= egress_pods, f"{name_of(np)}: egress misses {sorted(wanted - egress_pods)}")
                for rule in np["spec"].get("egress") or []:
                    fail.check(rule.get("ports"), f"{name_of(np)}: an egress rule allows every port")
            fail.check(not [n for n in policies if n not in {component_name(fullname, c) for c in enabled + ["gateway", "migrate"]}],
                       f"split: unexpected NetworkPolicies {sorted(policies)}")
        fail.check("sha256" in notes and values["secrets"]["existingSecret"] in notes, "NOTES.txt: does not explain the owner token hash and Secret")
    else:
        fail.check(not deployments and not by_kind.get("Job"), "allInOne: renders Deployments or Jobs")
        if fail.check(len(statefulsets) == 1, f"allInOne: {len(statefulsets)} StatefulSets, expected 1"):
            sts = statefulsets[0]
            fail.check(sts["spec"].get("replicas") == 1, f"{name_of(sts)}: replicas is not 1 (SQLite is single-writer)")
            c = sts["spec"]["template"]["spec"]["containers"][0]
            args = c.get("args") or []
            fail.check(args[:3] == ["up", "--data-dir", "/data"], f"{name_of(sts)}: args {args} do not start with up --data-dir /data")
            claims = {(t.get("metadata") or {}).get("name") for t in sts["spec"].get("volumeClaimTemplates") or []}
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts") or []}
            fail.check(mounts.get("/data") in claims, f"{name_of(sts)}: /data is not on a PersistentVolumeClaim")
        fail.check(not by_kind.get("HorizontalPodAutoscaler") and not by_kind.get("PodDisruptionBudget"),
                   "allInOne: an HPA or PDB for a single-writer pod")
        fail.check("cat /data/owner.token" in notes, "NOTES.txt: does not say how to read /data/owner.token")


def checksums(docs: list[dict]) -> dict[str, str]:
    return {
        name_of(d): (pod_template_meta(d).get("annotations") or {}).get("checksum/config", "")
        for d in docs
        if d.get("kind") in LONG_RUNNING
    }


def run_chart(chart_dir: Path, versions: list[str], fail: Failures) -> int:
    chart = Chart(chart_dir, versions)
    cases: list[tuple[str, dict, str]] = [("defaults", {}, "noema")]
    for path in sorted((chart_dir / "ci").glob("*.yaml")):
        cases.append((path.name, yaml.safe_load(path.read_text()) or {}, "prod"))
    count = 0
    modes = set()
    for label, overrides, release in cases:
        fail.context = f"chart[{label}]"
        started = time.monotonic()
        chart.lint(overrides, fail)
        try:
            rendered = chart.render(overrides, release=release)
        except helm.HelmError as err:
            fail.add(f"render failed: {err}")
            continue
        docs, notes = chart.documents(rendered, fail)
        for doc in docs:
            validate_schema(doc, versions, fail, name_of(doc))
        merged = chart.chart.merge_values(overrides)
        modes.add(merged["mode"])
        check_chart(docs, notes, merged, release, fail)
        if merged["mode"] == "split":
            # Independently of the merge logic: a service a values file names, and does not
            # turn off, has a Deployment.
            names = {d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"}
            for name, entry in (overrides.get("services") or {}).items():
                if (entry or {}).get("enabled", True):
                    fail.check(component_name(fullname_for(release, merged), name) in names,
                               f"services.{name} is in the values but has no Deployment")
        count += len(docs)
        print(f"    chart [{label}] mode={merged['mode']}: {len(docs)} objects"
              f" ({time.monotonic() - started:.1f}s)", file=sys.stderr)

        # A config change rolls every pod; a replica change rolls none.
        fail.context = f"chart[{label}] checksum"
        before = checksums(docs)
        changed = checksums(chart.documents(chart.render(deep_merge(overrides, {"config": {"authCacheTtlSecs": 29}}), release=release), Failures())[0])
        fail.check(before and all(before[k] != changed.get(k) for k in before), "a config change does not change every checksum/config")
        same = checksums(chart.documents(chart.render(deep_merge(overrides, {"gateway": {"replicas": 7}}), release=release), Failures())[0])
        fail.check(before == same, "checksum/config changes without a config change")
    fail.context = "chart"
    fail.check(modes == {"allInOne", "split"}, f"the values files cover modes {sorted(modes)}, not both")

    # Values that must be refused, with a message that names the problem.
    fail.context = "chart[refusals]"
    split = {"mode": "split", "secrets": {"existingSecret": "s"}, "s3": {"bucket": "b"}}
    refusals = [
        ({"mode": "split", "s3": {"bucket": "b"}}, "secrets.existingSecret"),
        ({"mode": "splitt"}, "mode"),
        (deep_merge(split, {"s3": {"bucket": ""}}), "s3.bucket"),
        (deep_merge(split, {"services": {"ledger": {"calls": ["nosuch"]}}}), "nosuch"),
        (deep_merge(split, {"services": {"ledger": {"replicaz": 3}}}), "replicaz"),
        (deep_merge(split, {"services": {"extra": {"enabled": True}}}), "grpcService"),
    ]
    for values, expected in refusals:
        try:
            chart.render(values)
        except helm.HelmError as err:
            fail.check(expected in str(err), f"refused {values} but the message does not name {expected!r}: {err}")
        else:
            fail.add(f"accepted values that must be refused ({expected}): {values}")
    fail.context = ""
    return count


# --- the service registry ---------------------------------------------------------------------


def check_registry_values(registry: list[dict], values: dict, fail: Failures) -> None:
    """The chart's `services` entries are the registered services, with their storage and peers."""
    defaults = values.get("serviceDefaults") or {}
    entries = values.get("services") or {}
    registered = {s["name"]: s for s in registry}
    for name in sorted(set(entries) - set(registered)):
        fail.add(f"values.yaml services.{name} is not a registered service (noema services --json)")
    for name in sorted(set(registered) - set(entries)):
        fail.add(f"the registered service {name} has no entry in values.yaml services")
    for name in sorted(set(entries) & set(registered)):
        entry, spec = entries[name] or {}, registered[name]

        def setting(key: str, entry: dict = entry) -> Any:
            return entry.get(key, defaults.get(key))

        expected = {
            "grpcService": spec["grpc_services"][0],
            "database": spec["database"],
            "objectStore": spec["object_store"],
            "calls": sorted(spec["calls"]),
            "ownerToken": spec["owner_token"],
        }
        for key, want in expected.items():
            have = setting(key)
            if key == "calls":
                have = sorted(have or [])
            fail.check(have == want, f"values.yaml services.{name}.{key} is {have!r}; the registry says {want!r}")


def check_registry_overlay(registry: list[dict], docs: list[dict], fail: Failures) -> None:
    """The dev overlay's per-service pieces (databases, their URLs, object stores) match the registry."""
    names = {s["name"] for s in registry if s["database"]}
    stores = {s["name"] for s in registry if s["object_store"]}

    def named(kind: str, prefix: str) -> list[dict]:
        return [d for d in docs if d.get("kind") == kind and d["metadata"]["name"].startswith(prefix)]

    def compare(what: str, have: set[str], want: set[str]) -> None:
        for name in sorted(have - want):
            fail.add(f"{what}: {name} is not a registered service")
        for name in sorted(want - have):
            fail.add(f"{what}: the registered service {name} is missing")

    secrets = named("Secret", "noema-dev-credentials")
    if fail.check(len(secrets) == 1, "no Secret noema-dev-credentials"):
        keys = set(secrets[0].get("data") or {}) | set(secrets[0].get("stringData") or {})
        compare("Secret noema-dev-credentials <service>-database-url",
                {k[: -len("-database-url")] for k in keys if k.endswith("-database-url")}, names)
    initdb = named("ConfigMap", "postgres-initdb")
    if fail.check(len(initdb) == 1, "no ConfigMap postgres-initdb"):
        sql = "\n".join((initdb[0].get("data") or {}).values())
        compare("postgres-initdb CREATE DATABASE noema_<service>",
                set(re.findall(r"CREATE DATABASE noema_([a-z0-9]+)", sql)), names)
    noema = [d for d in docs if d.get("kind") == "StatefulSet" and d["metadata"]["name"] == "noema"]
    if fail.check(len(noema) == 1, "no StatefulSet noema"):
        env = {e["name"] for _, c in containers(pod_spec(noema[0]) or {}) for e in c.get("env") or []}
        compare("StatefulSet noema env NOEMA__<SERVICE>__DATABASE_URL",
                {m.group(1).lower() for e in env if (m := re.fullmatch(r"NOEMA__([A-Z0-9]+)__DATABASE_URL", e))}, names)
    config = named("ConfigMap", "noema-config")
    if fail.check(len(config) == 1, "no ConfigMap noema-config"):
        data = config[0].get("data") or {}
        compare("ConfigMap noema-config NOEMA__<SERVICE>__OBJECT_STORE_URL",
                {m.group(1).lower() for k in data if (m := re.fullmatch(r"NOEMA__([A-Z0-9]+)__OBJECT_STORE_URL", k))}, stores)


def run_registry(registry_path: Path, values: dict, overlays: dict[str, list[dict]], fail: Failures) -> None:
    registry = json.loads(registry_path.read_text())
    fail.context = "registry"
    if not fail.check(isinstance(registry, list) and registry, f"{registry_path}: not a list of services"):
        return
    dev = {label: docs for label, docs in overlays.items() if label.split("/")[-1] == "dev"}
    fail.check(dev, "no k8s dev overlay was rendered (--manifests k8s/overlays/dev=…)")
    check_registry_values(registry, values, fail)
    for label, docs in dev.items():
        fail.context = f"registry[{label}]"
        check_registry_overlay(registry, docs, fail)

    # Drift either way is caught: mutated registries and values must each fail, naming the
    # service concerned.
    fail.context = "registry[drift]"
    extra = {"name": "example", "grpc_services": ["noema.example.v1.ExampleService"], "database": True,
             "object_store": True, "calls": ["identity"], "owner_token": False, "options": False}
    first = registry[0]["name"]
    mutations: list[tuple[str, list[dict], dict, str]] = [
        ("a registered service missing from values and the overlay", registry + [extra], values, "example"),
        ("a service in values and the overlay but not registered", registry[1:], values, first),
        ("values naming an unregistered service", registry,
         deep_merge(values, {"services": {"nosuch": {"grpcService": "noema.nosuch.v1.NoSuchService"}}}),
         "nosuch"),
    ]
    for index, spec in enumerate(registry):
        changed = copy.deepcopy(registry)
        changed[index]["grpc_services"] = ["noema.other.v1.OtherService"]
        mutations.append((f"{spec['name']}'s gRPC service changed", changed, values, f"services.{spec['name']}.grpcService"))
        changed = copy.deepcopy(registry)
        changed[index]["calls"] = sorted(set(spec["calls"]) ^ {"nosuch"})
        mutations.append((f"{spec['name']}'s calls changed", changed, values, f"services.{spec['name']}.calls"))
        changed = copy.deepcopy(registry)
        changed[index]["object_store"] = not spec["object_store"]
        mutations.append((f"{spec['name']}'s object store flipped", changed, values, spec["name"]))
    for what, mutated, mutated_values, named in mutations:
        probe = Failures()
        check_registry_values(mutated, mutated_values, probe)
        for docs in dev.values():
            check_registry_overlay(mutated, docs, probe)
        fail.check(any(named in item for item in probe.items),
                   f"the check misses {what}: {probe.items or 'no failure'}")
    fail.context = ""


def run_manifests(specs: list[str], versions: list[str], fail: Failures) -> tuple[int, dict[str, list[dict]]]:
    count = 0
    rendered: dict[str, list[dict]] = {}
    for spec in specs:
        label, _, path = spec.partition("=")
        fail.context = f"kustomize[{label}]"
        docs = parse_documents(Path(path).read_text(), fail, path)
        for doc in docs:
            validate_schema(doc, versions, fail, name_of(doc))
            if doc.get("kind") in WORKLOAD_KINDS:
                check_workload(doc, fail)
        check_no_plain_secrets(docs, fail, allow_dev_secrets="dev" in label.split("/")[-1])
        check_references(docs, fail)
        fail.check(docs, "renders nothing")
        count += len(docs)
        rendered[label] = docs
        print(f"    kustomize [{label}]: {len(docs)} objects", file=sys.stderr)
    fail.context = ""
    return count, rendered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chart", type=Path, required=True)
    parser.add_argument("--kube-version", action="append", required=True, help="e.g. 1.37 (repeatable)")
    parser.add_argument("--manifests", action="append", default=[], metavar="NAME=FILE")
    parser.add_argument("--registry", type=Path, required=True, metavar="FILE",
                        help="`noema services --json` output")
    args = parser.parse_args()
    versions = [supported_version(v) for v in args.kube_version]
    fail = Failures()
    started = time.monotonic()
    helm.disable_logging()
    objects = run_chart(args.chart, versions, fail)
    manifest_objects, overlays = run_manifests(args.manifests, versions, fail)
    objects += manifest_objects
    run_registry(args.registry, helm.Chart.load(str(args.chart)).values, overlays, fail)
    for item in fail.items:
        print(f"FAIL {item}", file=sys.stderr)
    print(
        f"    {objects} objects checked against Kubernetes {', '.join(versions)}"
        f" (helm SDK {helm.helm_sdk_version()}, kubernetes-validate {kv.__version__})"
        f" in {time.monotonic() - started:.1f}s: {len(fail.items)} problem(s)",
        file=sys.stderr,
    )
    return 1 if fail.items else 0


if __name__ == "__main__":
    sys.exit(main())
