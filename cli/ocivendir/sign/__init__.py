"""Owns: signature policies and their verification — Sigstore policy-controller's ClusterImagePolicy and cosign."""
