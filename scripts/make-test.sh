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

echo "== make test: 1/4 the local control plane (cached under $cache) =="
"$PY" -m omenative_devcluster build

bg=""
finish() {
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
"$PY" -m pytest tests/unit
echo "== make test: 3/4 property tests (hypothesis profile $HYPOTHESIS_PROFILE) =="
"$PY" -m pytest tests/property
echo "== make test: 4/4 integration tests (real kube-apiserver + etcd; component tests last) =="
status=0
"$PY" -m pytest $INTEGRATION || status=$?
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
