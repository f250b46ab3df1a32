"""The ``memos`` command line (:mod:`.app`) and its ``bench`` commands (:mod:`.bench`)."""
