"""Benchmarks, one command per figure: ``python -m benchmarks.<name>`` prints what it measured."""
