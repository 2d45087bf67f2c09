"""Owns: talking to registries — credentials, auth, retries, proxies and the verified client."""
