"""Owns: the content-addressed cache — an OCI image layout of verified blobs plus an SQLite index."""
