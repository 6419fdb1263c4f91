"""OMENative Kubernetes controller: the asyncio shell around the pure planning core."""
