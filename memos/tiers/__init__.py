"""The memory tiers over the storage rows: hot (raw recent messages), warm (rolling summary),
cold (facts), archival (everything that left the prompt), the session's state, what is
archived and extracted as messages arrive, the services one database shares, and erasure."""
