"""sift: a self-hosted web-search gateway and skill search for a fleet of AI agents."""

__version__ = "0.1.0"

__all__ = ["__version__"]
