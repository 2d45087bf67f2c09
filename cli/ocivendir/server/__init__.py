"""Owns: the resident server and its thin client — one warm interpreter, a pool of reused workers.

A call through the server behaves exactly as the same call in-process: a worker runs the ordinary entry point with
the caller's argv (argv[0] included), environment, working directory, umask and stdio descriptors. The wire format is
in `server/wire.py`; where the socket lives and who may use it, `server/place.py`; the build identity that keeps a
client and a server of different builds apart, `server/build.py`.
"""
