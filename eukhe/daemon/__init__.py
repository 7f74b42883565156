"""The eukhe daemon: a supervisor, one worker per open session, their sockets and the client protocol."""
