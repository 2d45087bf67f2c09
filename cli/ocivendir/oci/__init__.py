"""Owns: the OCI and imgpkg formats, as pure code (no I/O)."""
