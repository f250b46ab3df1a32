"""Classifiers over user sentences, each with its shipped weights: rules, revocations,
corrections, attributes and replacements (n-gram models, MiniLM heads for English)."""
