"""The sandbox's shell: bubblewrap's location and probe, the facts a launch reads off the disk, and a session's
confinement (rules in `eukhe.core.sandbox`; docs/sandbox.md)."""
