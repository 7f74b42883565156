"""`python -m eukhe_kernel`: run the kernel stub on stdin/stdout (S3 "The protocol")."""

from eukhe_kernel.main import main

main()
