"""Command-line tools: ``omenative`` (simulate), ``omenative-manager``, ``kubectl-ome``."""
