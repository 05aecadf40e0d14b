"""The contract every stage keeps: the canonical schema, the concept vocabulary and the
deterministic validator with its rule table."""
