# The omenative-manager image. NOTE: no image can be built on the development machine this
# repository is tested on (no container runtime there); this file is kept deliberately
# simple and has not been built here. Build and push it where Docker/Buildah is available:
#
#   docker build -t REGISTRY/omenative-manager:0.1.0 .
#   docker push REGISTRY/omenative-manager:0.1.0
#
# then point config/manager/kustomization.yaml's `images:` at it (docs/install.md).
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install . && rm -rf /src

WORKDIR /
# The distroless "nonroot" uid/gid; the Deployment runs it with a read-only root
# filesystem, no capabilities and no privilege escalation (config/manager/manager.yaml).
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["omenative-manager"]
