"""Stage 3, repair: fixes by code, re-asks of only the failing fields, and the ``repair FILE``
job for chunk files made by other tools."""
