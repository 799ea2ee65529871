"""Containment: what a worker process running a solution may reach.

The launching process plans it (:mod:`.mounts`: which folders a worker sees read-only,
writable again or not at all) and each worker applies it to itself before any solution code
loads (:mod:`.sandbox`: parent-death signal, namespaces, read-only binds, a run token on every
process it starts). It sits below both the engine and the evaluation: it imports neither, so a
change to how a run is scheduled or judged cannot loosen what a solution may touch.
"""
