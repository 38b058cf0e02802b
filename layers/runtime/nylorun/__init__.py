"""Nylorun Runtime for AWS: serves Agents to any A2A 1.0 caller (Nylorun Profile v2)."""
