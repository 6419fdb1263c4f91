#!/usr/bin/env bash
# `make test`: the control plane first, then the Go components in the background at the
# lowest CPU priority while the unit, property and integration tests run. The integration
# tests that need a component are ordered last (tests/integration/conftest.py) and wait for
# its build (omenative_devcluster.components.wait_for), so a cold machine spends the
# components' build time running the other tests instead of waiting for them.
set -euo pipefail
PY=${PY:-.venv/bin/python}
WITH=${WITH-runc,containerd,coredns,lws,helm,kueue,scheduler-plugins}
INTEGRATION=${INTEGRATION:-tests/integration}
export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}
cache=${OMENATIVE_CACHE:-$HOME/.cache/omenative}
log="$cache/components-build.log"

# Real nodes (the real-node and traffic tests, runc's seccomp build) need a few Debian
# packages; a fresh machine gets them here, as root, the way `make realnodes-deps` does.
if ! command -v iptables >/dev/null || ! command -v conntrack >/dev/null \
   || [ ! -x /usr/lib/cni/bridge ] || ! pkg-config --exists libseccomp 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "== make test: installing the Debian packages real nodes need (make realnodes-deps) =="
    make -s realnodes-deps >/dev/null
  else
    echo "== make test: real nodes need Debian packages: run \`sudo make realnodes-deps\` first =="
    exit 1
  fi
fi

echo "== make test: 1/4 the local control plane (cached under $cache) =="
"$PY" -m omenative_devcluster build

# Each stage writes a JUnit report; scripts/count_tests.py prints how many tests ran and
# fails the run when a folder ran fewer than its floor in tests/floors.toml.
reports="$(mktemp -d /tmp/omenative-junit.XXXXXX)"
counted() {  # counted FOLDER: the folder's tests, then its count against the floor
  local name
  name="$(echo "$1" | tr ' /' '__')"
  "$PY" -m pytest "$1" --junitxml="$reports/$name.xml" || return $?
  "$PY" scripts/count_tests.py "$1=$reports/$name.xml"
}

bg=""
finish() {
  rm -rf "$reports"
  if [ -n "$bg" ] && kill -0 "$bg" 2>/dev/null; then
    echo "== make test: stopping the unfinished background build of $WITH =="
    kill "$bg" 2>/dev/null || true
    wait "$bg" 2>/dev/null || true
  fi
}
trap finish EXIT
if [ -n "$WITH" ]; then
  mkdir -p "$cache"
  echo "== make test: building $WITH in the background at nice 19 (progress: $log) =="
  nice -n 19 "$PY" -m omenative_devcluster build --with "$WITH" >"$log" 2>&1 &
  bg=$!
fi

echo "== make test: 2/4 unit tests =="
counted tests/unit
echo "== make test: 3/4 property tests (hypothesis profile $HYPOTHESIS_PROFILE) =="
counted tests/property
echo "== make test: 4/4 integration tests (real kube-apiserver + etcd; component tests last) =="
status=0
# (a subset, INTEGRATION=some/files, has no floor: its count is printed only)
# (KWOK's and KEDA's tests are extended targets, `make test-kwok` and `make test-keda`:
# their cold builds are minutes)
"$PY" -m pytest $INTEGRATION -m "not kwok and not keda" --junitxml="$reports/integration.xml" || status=$?
"$PY" scripts/count_tests.py "$INTEGRATION=$reports/integration.xml" || status=1
if [ -n "$bg" ]; then
  if ! wait "$bg"; then
    echo "== make test: the background build of $WITH FAILED; its log: =="
    tail -n 40 "$log"
    status=1
  fi
  bg=""
  grep -h "BUILD TIME\|cached in" "$log" || true
fi
exit $status
