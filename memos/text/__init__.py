"""Text: sentences, identifiers and patterns, search terms and the keyword tokeniser, scripts,
embeddings, and the classifiers (with their shipped weights) that read what users say.

Nothing here knows about tiers or storage; the layers above import from here, never the
other way round.
"""
