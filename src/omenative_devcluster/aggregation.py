"""The kube-apiserver's aggregation layer, as an option of the devcluster
(``ClusterOptions.aggregation``).

An extension API server (KEDA's external-metrics adapter, ``keda.py``) is reached through
the kube-apiserver: an ``APIService`` names it, and the kube-apiserver proxies each request
to it with a client certificate of its own (``--proxy-client-cert-file``), the caller's
name and groups in ``X-Remote-*`` headers. The extension server trusts those headers only
from a client whose certificate the front-proxy CA signed and whose name is allowed
(``--requestheader-*``; it reads them from the ``extension-apiserver-authentication``
ConfigMap the kube-apiserver publishes). The CA and certificate are made here, per cluster,
as kubeadm makes them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["FRONT_PROXY_CLIENT", "aggregation_flags", "front_proxy_certs"]

FRONT_PROXY_CLIENT = "front-proxy-client"
"""The common name of the kube-apiserver's proxy client certificate (kubeadm's)."""


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def front_proxy_certs(certs: Path) -> None:
    """The front-proxy CA and the client certificate it signs, written into ``certs``."""
    ca_key, ca_crt = certs / "front-proxy-ca.key", certs / "front-proxy-ca.crt"
    csr = certs / "front-proxy-client.csr"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
             "-subj", "/CN=omenative-devcluster-front-proxy-ca",
             "-keyout", str(ca_key), "-out", str(ca_crt))
    _openssl("req", "-newkey", "rsa:2048", "-nodes",
             "-keyout", str(certs / "front-proxy-client.key"),
             "-subj", f"/CN={FRONT_PROXY_CLIENT}", "-out", str(csr))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key),
             "-CAcreateserial", "-days", "30", "-out", str(certs / "front-proxy-client.crt"))


def aggregation_flags(certs: Path) -> list[str]:
    """The kube-apiserver flags of the aggregation layer (certificates from
    ``front_proxy_certs``)."""
    return [
        f"--requestheader-client-ca-file={certs / 'front-proxy-ca.crt'}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={certs / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={certs / 'front-proxy-client.key'}",
    ]
