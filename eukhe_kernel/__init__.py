"""The kernel stub: runs cells inside the Python kernel; standard library plus what the kernel lock pins."""
