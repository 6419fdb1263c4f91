"""Per-revision Service names, bodies and the peer endpoint variables."""

from __future__ import annotations

from omenative_core.rollout import (
    paired_peer_revisions,
    peer_env,
    render_revision_service,
    revision_headless_service_name,
    revision_service_name,
    traffic_revision_name,
)

STABLE = {"engine": "llama-engine-aaaaaaaaaa", "decoder": "llama-decoder-cccccccccc"}
CANARY = {"engine": "llama-engine-bbbbbbbbbb", "decoder": "llama-decoder-dddddddddd"}


def test_names() -> None:
    assert revision_service_name("llama", "engine", "bbbbbbbbbb") == "llama-engine-rev-bbbbbbbbbb"
    assert revision_headless_service_name("llama", "engine", "bbbbbbbbbb") == (
        "llama-engine-rev-bbbbbbbbbb-headless"
    )
    assert traffic_revision_name("llama-engine-bbbbbbbbbb") == "llama-engine-rev-bbbbbbbbbb"
    assert traffic_revision_name("plain") == "plain"


def test_revision_service_selects_one_revision() -> None:
    svc = render_revision_service("llama", "decoder", "dddddddddd", "ml")
    assert svc["metadata"]["name"] == "llama-decoder-rev-dddddddddd"
    assert svc["metadata"]["namespace"] == "ml"
    assert svc["spec"]["selector"] == {
        "ome.io/inferenceservice": "llama",
        "component": "decoder",
        "ome.io/revision-hash": "dddddddddd",
    }
    headless = render_revision_service(
        "llama",
        "decoder",
        "dddddddddd",
        "ml",
        headless=True,
        ports=[{"name": "grpc", "port": 9000}],
    )
    assert headless["metadata"]["name"].endswith("-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert headless["spec"]["ports"] == [{"name": "grpc", "port": 9000}]


def test_a_canary_decoder_finds_the_canary_engine() -> None:
    peers = paired_peer_revisions("decoder", CANARY["decoder"], STABLE, CANARY)
    assert peers == {"engine": CANARY["engine"]}
    env = peer_env("llama", "decoder", "ml", peers)
    assert env == {
        "OME_ENGINE_ENDPOINT": "llama-engine.ml.svc.cluster.local",
        "OME_ENGINE_REVISION_ENDPOINT": "llama-engine-rev-bbbbbbbbbb.ml.svc.cluster.local",
    }


def test_a_stable_pod_pairs_with_the_stable_peer() -> None:
    peers = paired_peer_revisions("engine", STABLE["engine"], STABLE, CANARY)
    assert peers == {"decoder": STABLE["decoder"]}
    # a canary engine whose decoder has no canary pairs with the stable decoder
    only_engine = {"engine": CANARY["engine"]}
    assert paired_peer_revisions("engine", CANARY["engine"], STABLE, only_engine) == {
        "decoder": STABLE["decoder"]
    }


def test_the_router_sees_both_and_unknown_peers_get_the_plain_endpoint() -> None:
    env = peer_env("llama", "router", "ml", {"engine": STABLE["engine"]})
    assert env == {
        "OME_ENGINE_ENDPOINT": "llama-engine.ml.svc.cluster.local",
        "OME_ENGINE_REVISION_ENDPOINT": "llama-engine-rev-aaaaaaaaaa.ml.svc.cluster.local",
        "OME_DECODER_ENDPOINT": "llama-decoder.ml.svc.cluster.local",
    }
