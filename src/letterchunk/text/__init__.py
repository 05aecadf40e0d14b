"""Stage 1, text: a letter file -> cleaned text -> blocks -> canonical chunks (no LLM).

``clean`` reads and normalises a letter, ``blocks`` finds paragraphs, headers and tables,
``tables`` parses a table block, ``segment`` cuts the tiers; o200k token counts come from the
ground-floor ``letterchunk.tokens``.
"""
