"""KEDA's ScaledObject CRD, for checking the ScaledObjects omenative renders against KEDA's
own schema on the test API server (server-side validation, no KEDA operator).

The CRD comes from the Go module ``github.com/kedacore/keda/v2`` at ``KEDA_VERSION``
(``config/crd/bases/keda.sh_scaledobjects.yaml``), fetched once through the Go module proxy
with ``go mod download -json`` and kept under ``$OMENATIVE_CACHE/components/keda/<version>/``.
Nothing is built.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import yaml

from omenative_devcluster.build import cache_root

__all__ = ["KEDA_MODULE", "KEDA_VERSION", "scaledobject_crd"]

KEDA_MODULE = "github.com/kedacore/keda/v2"
KEDA_VERSION = "v2.21.1"
_CRD_PATH = "config/crd/bases/keda.sh_scaledobjects.yaml"


def _download_zip() -> Path:
    """The module zip (``go mod download`` leaves it even when the module asks for a newer
    Go toolchain than the local one: only the zip is read)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    done = subprocess.run([go, "mod", "download", "-json", f"{KEDA_MODULE}@{KEDA_VERSION}"],
                          capture_output=True, text=True, env=env, timeout=600,
                          cwd=cache_root(), check=False)
    try:
        info = json.loads(done.stdout)
    except ValueError:
        raise RuntimeError(f"go mod download {KEDA_MODULE}@{KEDA_VERSION}: "
                           f"{done.stderr.strip() or done.stdout.strip()}") from None
    zip_path = Path(str(info.get("Zip") or ""))
    if not zip_path.is_file():
        raise RuntimeError(f"go mod download {KEDA_MODULE}@{KEDA_VERSION}: no zip "
                           f"({info.get('Error') or done.stderr.strip()})")
    return zip_path


def scaledobject_crd() -> dict[str, Any]:
    """KEDA's ``scaledobjects.keda.sh`` CRD, as the module ships it."""
    cached = cache_root() / "components" / "keda" / KEDA_VERSION / "keda.sh_scaledobjects.yaml"
    if not cached.is_file():
        cache_root().mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(_download_zip()) as archive:
            text = archive.read(f"{KEDA_MODULE}@{KEDA_VERSION}/{_CRD_PATH}").decode()
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(cached)
    body = yaml.safe_load(cached.read_text())
    if not isinstance(body, dict) or body.get("kind") != "CustomResourceDefinition":
        raise RuntimeError(f"{cached} is not a CustomResourceDefinition")
    return body
