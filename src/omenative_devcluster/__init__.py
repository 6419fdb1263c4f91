"""Local control plane for tests: build, start, and a kubelet stand-in."""
