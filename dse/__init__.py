"""dse: hardware-aware performance model and design-space explorer for distributed LLM
training and inference (see README.md and docs/architecture.md)."""

__version__ = "0.1.0"
