"""Shared test helpers (bounded waits, a private Ray head, the quickstart runner)."""
