"""eukhe: the execution layer of a coding agent.

Runs shell commands, Python cells and sub-agents so that nothing is lost and nothing leaks. The pure decisions
live in `eukhe.core`; everything else here is the imperative shell that reads facts and does what the core answers.
"""

__version__ = "0.1.0"
