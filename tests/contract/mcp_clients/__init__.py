"""Contract tests of `sift mcp` with the official MCP SDK (one venv per SDK line)."""
