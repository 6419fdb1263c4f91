# omenative developer targets. `make help` lists them.
PY ?= .venv/bin/python
VENV ?= .venv
export PYTHONPATH := src

.PHONY: help setup test test-build test-unit test-property test-integration test-k8s-other test-kwok test-keda test-long lint format \
        typecheck bench bench-controller bench-kwok bench-failover realnodes-deps bench-memory simulate api-docs manifests docs pictures chart chart-check cluster \
        cluster-down install uninstall image ci clean demo

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

setup: ## create .venv and install omenative with the dev extras
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	@echo "real nodes (make cluster REAL_NODES=N, the real-node tests) also need Debian packages: make realnodes-deps (as root)"

# The Go components the integration tests run (the control plane is always built): LWS for
# the MultiNode and hand-over tests, runc, containerd and CoreDNS for the real nodes
# (test_realnodes.py; first, their tests take longest), helm for test_helm.py, Kueue for
# test_kueue.py, scheduler-plugins for test_coscheduling.py. `make test` builds them in the background, in
# this order (quickest build with the longest tests first), while the other tests run; `make
# test WITH=` builds only the control plane. Keep tests/integration/conftest.py's
# COMPONENT_ORDER in step.
WITH ?= runc,containerd,coredns,lws,helm,kueue,scheduler-plugins
# `make test INTEGRATION=tests/integration/test_helm.py` runs only some integration files.
INTEGRATION ?= tests/integration

test: ## control plane, then unit, property, integration tests (components build meanwhile)
	PY=$(PY) WITH=$(WITH) INTEGRATION="$(INTEGRATION)" scripts/make-test.sh

test-build: ## build (or find) the local control plane and the Go components, in the foreground
	$(PY) -m omenative_devcluster build $(if $(WITH),--with $(WITH))

test-unit: ## unit tests only
	$(PY) -m pytest tests/unit

test-property: ## property tests only (dev profile)
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-dev} $(PY) -m pytest tests/property

test-integration: ## integration tests against the local control plane (starts one unless KUBECONFIG is set)
	$(PY) -m pytest tests/integration

# The Kubernetes release that is not the default (omenative_devcluster.build.OTHER_K8S_VERSION);
# its control plane is cached beside the default one (~25 min cold, so not in `make test`).
K8S_OTHER ?= $(shell PYTHONPATH=src $(PY) -c 'from omenative_devcluster.build import OTHER_K8S_VERSION as v; print(v)')

test-k8s-other: ## native-gang integration tests on the other Kubernetes release (K8S_OTHER; builds it first, ~25 min cold)
	OMENATIVE_K8S_VERSION=$(K8S_OTHER) $(PY) -m omenative_devcluster build
	env -u KUBECONFIG OMENATIVE_K8S_VERSION=$(K8S_OTHER) $(PY) -m pytest -q tests/integration/test_native_gang.py

test-kwok: ## KWOK's integration test (builds kwok v0.8.0 first, ~6 min cold; not in `make test`)
	$(PY) -m omenative_devcluster build --with kwok
	$(PY) -m pytest -q -m kwok tests/integration/test_kwok.py

test-keda: ## KEDA's operator scaling an InferenceService (builds keda v2.21.1 first, ~30 min cold; not in `make test`)
	$(PY) -m omenative_devcluster build --with keda
	env -u KUBECONFIG $(PY) -m pytest -q -m keda tests/integration/test_keda_operator.py

test-long: ## property tests with the long hypothesis profile
	HYPOTHESIS_PROFILE=long $(PY) -m pytest tests/property

lint: ## ruff (with the core's bans), import-linter (the package boundaries), no asyncio.wait_for in src
	$(VENV)/bin/ruff check src tests benchmarks examples scripts charts
	$(VENV)/bin/lint-imports
	@! grep -rnE 'asyncio\.wait_for\(' src || { echo "asyncio.wait_for loses a cancel on Python 3.11 (CPython gh-86296): use asyncio.timeout"; exit 1; }

format: ## ruff format
	$(VENV)/bin/ruff format src tests

typecheck: ## mypy --strict on src/
	$(VENV)/bin/mypy --strict src

bench: ## in-process benchmarks: planner, big-replica decode, InferenceService + rollout layers, GPU advisor, status size, event-loop gap applying big plans, index sets
	$(PY) benchmarks/bench_planner.py
	$(PY) benchmarks/bench_decode.py
	$(PY) benchmarks/bench_service.py
	$(PY) benchmarks/bench_advisor.py
	$(PY) benchmarks/bench_status.py
	$(PY) benchmarks/bench_apply.py
	$(PY) benchmarks/bench_indexsets.py

bench-controller: ## controller benchmark on the local control plane (flags via the script: --peer lws, --gang-scheduling None, --py-spy PATH)
	$(PY) benchmarks/bench_controller.py

# The scale run of docs/benchmarks.md on KWOK nodes (KWOK_REPLICAS gangs of 4 pods on at
# least KWOK_NODES nodes; KWOK_ARGS more flags, e.g. "--peer lws --timeout 1800").
KWOK_REPLICAS ?= 250
KWOK_INSTANCES ?= 1
KWOK_NODES ?= 4
KWOK_ARGS ?=

bench-kwok: ## controller benchmark on KWOK's simulated nodes (builds kwok first; KWOK_REPLICAS, KWOK_INSTANCES, KWOK_NODES, KWOK_ARGS)
	$(PY) -m omenative_devcluster build --with kwok
	$(PY) benchmarks/bench_controller.py --nodes-backend kwok --replicas $(KWOK_REPLICAS) --instances $(KWOK_INSTANCES) --nodes $(KWOK_NODES) --gang-scheduling None $(KWOK_ARGS)

bench-failover: ## leader hand-over times on a real API server, hard kill and graceful stop (KUBECONFIG, else starts a control plane)
	$(PY) benchmarks/bench_failover.py

bench-memory: ## the running manager's RSS with 10,000 watched pods, everything it keeps (issue 14 target 5; starts a control plane, ~8 min busy)
	$(PY) benchmarks/bench_memory.py

simulate: ## run the bundled example scenario
	$(VENV)/bin/omenative simulate examples/engine-gang.yaml

api-docs: ## API reference of omenative_core (pdoc) into a temp dir (API_DOCS_DIR to choose); fails on any pdoc warning
	@out="$${API_DOCS_DIR:-$$(mktemp -d /tmp/omenative-api-docs.XXXXXX)}"; \
	warnings="$$($(PY) -m pdoc --docformat restructuredtext --output-directory "$$out" omenative_core 2>&1)" \
	  || { echo "$$warnings"; echo "pdoc failed"; exit 1; }; \
	if [ -n "$$warnings" ]; then echo "$$warnings"; \
	  echo "pdoc warned (above): fix the docstrings or annotations it names"; exit 1; fi; \
	echo "API reference: $$out/index.html"

manifests: ## regenerate config/crd/ (OME's schema), config/crd-loose/ and config/ome-crd/ from the code
	$(PY) -m omenative_controller.crd
	$(PY) -m omenative_controller.service_crds

docs: ## regenerate the generated sections of docs/ (the lifecycle table in docs/lifecycle.md)
	$(PY) scripts/render_docs.py

pictures: ## regenerate docs/pictures/ (the simulator examples' data and SVGs; recorded traffic runs redrawn)
	$(PY) scripts/render_pictures.py

chart: ## copy config/'s shared objects (CRDs, RBAC, admission) into charts/omenative/files/
	$(PY) charts/sync.py

chart-check: ## fail if charts/omenative/files/ is stale against config/ (run `make chart`)
	$(PY) charts/sync.py --check

# `make cluster REAL_NODES=2` starts real nodes (kubelet + containerd each; needs root and
# `make realnodes-deps`) instead of the kubelet stand-in's fake ones.
REAL_NODES ?= 0

cluster: ## build (cached) and start the local control plane in the foreground (REAL_NODES=N: real nodes)
	$(PY) -m omenative_devcluster up $(if $(filter-out 0,$(REAL_NODES)),--real-nodes $(REAL_NODES))

# What real nodes need from Debian: iptables (kube-proxy, the kubelet), the CNI plugins
# (bridge, host-local, portmap), conntrack (kube-proxy), libseccomp-dev + pkg-config (runc
# is built with seccomp). .ci/run installs the same.
REALNODES_DEBS = iptables conntrack containernetworking-plugins libseccomp-dev pkg-config

realnodes-deps: ## install the Debian packages real nodes need (apt-get; as root)
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(REALNODES_DEBS)

demo: ## real nodes + the manager: roll a leader+worker engine out under traffic, print answers per revision and failed requests, clean up
	$(PY) -m omenative_devcluster demo

cluster-down: ## stop the local control plane started by `make cluster`
	$(PY) -m omenative_devcluster down

install: ## apply config/ to the current cluster (guarded against foreign CRDs; asks first)
	$(VENV)/bin/omenative install

uninstall: ## remove what `make install` applied (keeps the CRDs; refuses while workloads remain)
	$(VENV)/bin/omenative uninstall

# `make image IMAGE_TAG=0.1.1 IMAGE_REPOSITORY=registry.example/omenative-manager`; the OCI
# archive lands in $OMENATIVE_CACHE/images/ (path on stdout). No Docker, no registry: Debian
# packages (apt-get download) and wheels (pip), pinned in image/ (docs/install.md).
IMAGE_REPOSITORY ?= ghcr.io/omenative/omenative-manager
IMAGE_TAG ?=

image: ## build the manager's OCI image reproducibly (cached), print its archive path
	$(PY) -m omenative_devcluster.manager_image --repository $(IMAGE_REPOSITORY) $(if $(IMAGE_TAG),--tag $(IMAGE_TAG))

ci: ## what CI runs
	bash .ci/run

clean: ## remove caches (not the control-plane build cache)
	rm -rf .mypy_cache .ruff_cache .pytest_cache .hypothesis
