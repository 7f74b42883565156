"""The pure decision core of eukhe.

Rules for every module in this package (a test walks the imports to keep them):
- no I/O, no clock, no asyncio, no subprocesses, no sockets: only values in, values out;
- no imports from the rest of the `eukhe` package;
- decisions are data: frozen records and small immutable state machines the shell can feed.
The shell reads facts (bytes, stat results, pids, the clock), asks the core, and does what it answers.
"""
