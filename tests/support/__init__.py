"""Shared test helpers (real servers and fixtures used by several test packages)."""
