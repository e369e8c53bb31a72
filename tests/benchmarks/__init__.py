"""Benchmark scripts, run by hand: python -m tests.benchmarks.<name>."""
