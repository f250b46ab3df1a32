"""The memory tiers: hot (raw recent messages) and warm (rolling summary)."""
