"""Owns: compatibility with go-yaml v2 (sigs.k8s.io/yaml), both halves: `emit` writes, `load` reads with budgets."""
