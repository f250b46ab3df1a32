"""Storage: memos' schema, the message log (messages, summaries, compaction events), the fact
and archive rows, and where archival vectors live. Rows, not policy."""
