"""Reads: what the API and the pages answer from. Nothing here writes."""
