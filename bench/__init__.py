"""Benchmark scripts: each prints medians, p99s and ratios against a baseline run in the same process."""
