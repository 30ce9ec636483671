"""FLIP (backward inference): the instruction a response answers, and its word-level F1 against the original."""
