"""Text rules every layer shares: sentences, identifiers, search terms, the rule classifier.

Nothing here knows about messages, tiers or storage; the tiers and the pager import from
here, never the other way round.
"""
