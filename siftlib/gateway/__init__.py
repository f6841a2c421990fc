"""Serve mode: the HTTP gateway, its wire format, its APIs and its metrics."""
