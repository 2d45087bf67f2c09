"""Owns: filesystem primitives — locks, atomic writes, staged swaps and safe layer extraction."""
