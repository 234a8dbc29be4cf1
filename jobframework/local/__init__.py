"""The local runtime: the embedded AWS, the event-source-mapping emulator, the local scheduler."""
