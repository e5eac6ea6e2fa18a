"""Benchmarks of the outbox handlers against a one-record-per-call baseline (`make bench`).

Everything runs in one process against moto in-process, with fake credentials:
nothing can reach a real account. Not part of `make test`: timings are
reported, never asserted there (tests/unit/test_bench_counts.py checks only the
call counts).
"""
