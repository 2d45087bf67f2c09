"""Owns: vendir's formats, pure — the config stream, the lock file, doublestar globs and semver selection."""
