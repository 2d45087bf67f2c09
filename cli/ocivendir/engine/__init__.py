"""Owns: the work — pull, relocation checks, sync — wired from the formats, the client, the cache and fs."""
