"""Sessions: the :class:`~memos.Memory` facade, the store that serves many sessions, the
wiring of one session's parts, and moving a session in and out."""
