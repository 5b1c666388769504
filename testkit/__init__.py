"""What the tests and the benchmarks both use: span streams, golden expositions, stored-trace
files, simulated eval runs, hostile clients and ``loopwatch serve`` as a child process. Neither
tests/ nor benchmarks/ imports the other; both import this."""
