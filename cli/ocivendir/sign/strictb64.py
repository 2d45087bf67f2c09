"""Owns: strict base64 — the one decoder of `sign/`: standard alphabet, padding required, nothing else in the text.

Signatures, certificates, Rekor entries, bundles and trusted roots all carry base64 text; each reader names what it
read in its own error, and this is what they all decode it with (as Go's `base64.StdEncoding` reads it: no
whitespace, no missing padding, no characters outside the alphabet).
"""

from __future__ import annotations

import binascii

__all__ = ["decode"]


def decode(text: str) -> bytes | None:
    """The bytes `text` encodes, or None when it is not strict standard base64."""
    try:
        return binascii.a2b_base64(text.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        return None
