"""Text: what a model or a rule reads of a content's text (its parts, what a browser would hide, watched terms and their matching, the language), and quotes of it."""
