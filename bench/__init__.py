"""Owns: the benchmarks behind `./bench/run.sh`, written to RESULTS.md and results.json.

Scenarios: the kapp-controller fleet side by side with vendir, cold pulls against skopeo and imgpkg, start-up, the
cache at scale and verify-relocation.
"""
