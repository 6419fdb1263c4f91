"""How the devcluster runs KEDA beside the API server: the processes stay on loopback, the
adapter is reached through the aggregation layer, and KEDA builds with the Go its module
asks for."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

from omenative_devcluster import components, keda
from omenative_devcluster.aggregation import aggregation_flags
from omenative_devcluster.keda import (
    METRICS_API,
    METRICS_SERVICE,
    _adapter_args,
    _operator_args,
    keda_certs,
    metrics_api_objects,
)

PORTS = {"metrics": 1001, "health": 1002, "grpc": 1003, "adapter": 1004,
         "adapter-metrics": 1005}


def _flags(args: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--").split("=", 1) for a in args[1:])


def test_the_operator_listens_on_loopback_only_and_makes_no_certificates() -> None:
    flags = _flags(_operator_args(Path("/bin/keda-operator"), Path("/c"), PORTS))
    assert flags["metrics-bind-address"] == "127.0.0.1:1001"
    assert flags["health-probe-bind-address"] == "127.0.0.1:1002"
    assert flags["metrics-service-bind-address"] == "127.0.0.1:1003"
    assert flags["cert-dir"] == "/c"
    # our certificates, never KEDA's rotation (it would patch the APIService and webhooks)
    assert flags["enable-cert-rotation"] == "false"
    assert flags["enable-apiservice-patching"] == "false"
    assert flags["leader-elect"] == "false"


def test_the_adapter_serves_on_loopback_and_reaches_the_operators_grpc_port() -> None:
    flags = _flags(_adapter_args(Path("/bin/keda-adapter"), Path("/c"), Path("/k"), PORTS))
    assert flags["bind-address"] == "127.0.0.1"
    assert flags["secure-port"] == "1004"
    assert flags["metrics-service-address"] == "127.0.0.1:1003"
    assert flags["tls-cert-file"] == "/c/tls.crt"
    assert flags["authentication-kubeconfig"] == flags["authorization-kubeconfig"] == "/k"


def test_the_apiservice_names_an_externalname_service_to_localhost(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"PEM")
    namespace, service, api = metrics_api_objects(1004, ca)
    assert namespace["metadata"]["name"] == service["metadata"]["namespace"] == "keda"
    assert service["spec"]["type"] == "ExternalName"
    assert service["spec"]["externalName"] == "localhost"
    assert api["metadata"]["name"] == METRICS_API
    assert api["spec"]["service"] == {"name": METRICS_SERVICE, "namespace": "keda",
                                      "port": 1004}
    assert base64.b64decode(api["spec"]["caBundle"]) == b"PEM"
    assert "insecureSkipTLSVerify" not in api["spec"]


def test_one_certificate_serves_both_ends_and_the_aggregators_server_name(
        tmp_path: Path) -> None:
    certs = keda_certs(tmp_path)
    assert {p.name for p in certs.iterdir()} >= {"ca.crt", "tls.crt", "tls.key"}  # KEDA's
    text = subprocess.run(["openssl", "x509", "-in", str(certs / "tls.crt"), "-noout",
                           "-text"], capture_output=True, text=True, check=True).stdout
    # the kube-apiserver checks the adapter's certificate for <service>.<namespace>.svc
    assert f"DNS:{METRICS_SERVICE}.keda.svc" in text
    assert "IP Address:127.0.0.1" in text
    assert "TLS Web Server Authentication" in text and "TLS Web Client Authentication" in text
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(certs / "ca.crt"),
                               str(certs / "tls.crt")], capture_output=True, text=True,
                              check=False)
    assert verified.returncode == 0, verified.stderr


def test_the_aggregation_flags_trust_only_the_front_proxy_client(tmp_path: Path) -> None:
    flags = _flags(["kube-apiserver", *aggregation_flags(tmp_path)])
    assert flags["requestheader-allowed-names"] == "front-proxy-client"
    assert flags["requestheader-client-ca-file"] == str(tmp_path / "front-proxy-ca.crt")
    assert flags["proxy-client-cert-file"] == str(tmp_path / "front-proxy-client.crt")


def test_keda_builds_both_commands_with_the_toolchain_its_module_asks_for() -> None:
    component = components.COMPONENTS["keda"]
    assert (component.module, component.version) == (keda.KEDA_MODULE, keda.KEDA_VERSION)
    assert component.commands == {"keda-operator": "cmd/operator",
                                  "keda-adapter": "cmd/adapter"}
    assert component.toolchain == "go1.27.4"  # KEDA v2.21.1's go.mod: go 1.27.4
    assert components._toolchain_env(component) == {"GOTOOLCHAIN": "go1.27.4"}
    assert components._toolchain_env(components.COMPONENTS["kwok"]) == {}

