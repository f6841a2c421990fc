"""Thin subcommand modules: parse, call the library, turn its errors into messages."""
