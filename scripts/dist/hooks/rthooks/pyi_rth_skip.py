"""Owns: nothing — it replaces PyInstaller's inspect and pkgutil runtime hooks, which ocivendir does not need."""
