"""kubernetes-asyncio loaded lazily: the client still works, the unused models stay unloaded."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

KUBECONFIG = textwrap.dedent("""\
    apiVersion: v1
    kind: Config
    clusters:
    - name: c
      cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
    users:
    - name: u
      user: {token: secret-token}
    contexts:
    - name: ctx
      context: {cluster: c, user: u}
    current-context: ctx
    """)

PROBE = textwrap.dedent("""\
    import asyncio, json, sys
    from omenative_controller.kube.client import KubeClient, load_configuration
    cfg = asyncio.run(load_configuration(sys.argv[1]))
    loaded = sorted(m for m in sys.modules if m.startswith("kubernetes_asyncio.client.models."))
    from kubernetes_asyncio.client import CoreV1Api, V1Pod
    from kubernetes_asyncio import client
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="p"))

    async def connect():
        kube = await KubeClient.connect(sys.argv[1])
        await kube.close()

    asyncio.run(connect())
    print(json.dumps({"host": cfg.host, "token": cfg.api_key.get("BearerToken", ""),
                      "models_before": len(loaded), "pod": pod.metadata.name,
                      "api": CoreV1Api.__name__, "same": V1Pod is client.V1Pod}))
    """)


def test_the_client_works_without_importing_every_generated_model(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    out = subprocess.run([sys.executable, "-c", PROBE, str(kubeconfig)], check=True,
                         capture_output=True, text=True, timeout=120)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["host"] == "https://127.0.0.1:6443"
    assert got["token"].endswith("secret-token")
    assert got["models_before"] < 20  # of ~1,500 generated models
    assert got["pod"] == "p" and got["api"] == "CoreV1Api" and got["same"] is True
