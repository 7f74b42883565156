"""The host side of the Python kernel (S3 "The protocol", "Where the sandbox runs"): manager, splitter, launch."""
