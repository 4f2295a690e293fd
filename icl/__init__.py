"""icl: in-context learning with linear and softmax attention, for reproducing
"Emergent Inverse-Depth Scaling From Nonlinearity In Attention" (arXiv:2610.11063)."""

# Bump when a change alters what training computes: it is part of every run-cache key.
__version__ = "0.1.0"
