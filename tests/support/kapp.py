"""Owns: what kapp-controller puts on a fetch's stdin before the Config: its placeholder image-pull Secret."""

from __future__ import annotations

__all__ = ["placeholder_secret"]


def placeholder_secret(name: str = "my-pkgi") -> str:
    """The placeholder Secret (an empty {"auths":{}}) kapp-controller writes for App `name`, then a document separator."""
    return f"""apiVersion: v1
data:
  .dockerconfigjson: eyJhdXRocyI6e319
kind: Secret
metadata:
  annotations:
    secretgen.carvel.dev/image-pull-secret: ""
  name: {name}-fetch-0
  namespace: apps
type: kubernetes.io/dockerconfigjson
---
"""
