"""Developer tools outside the icl package: `make bench` (benchmarks/bench.py) times icl against the
plain algebra and each C kernel against autograd."""
