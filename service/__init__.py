"""Running handoff as a service: clean stops on signals, systemd's notify protocol and watchdog,
the unit file, the status file `handoff status` reads and the history `handoff history` reads.

Nothing here decides what the assistant does; it watches (the timeline, the listener, the
narrator, the task manager) and tells the outside world.
"""
