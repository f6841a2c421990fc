"""Outbound connections: the pinned, SSRF-guarded dialer and the deadlines it honours."""
