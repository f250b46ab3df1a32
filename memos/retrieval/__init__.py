"""Retrieval: what the archive and the facts bring back into a session (recall)."""
