"""Learning While Evaluating ("Becoming Experienced Judges: Selective Test-Time Learning for Evaluators"), in one place:

- judging.py: `lwe_judge` (Selective LWE for one case, the meta-prompt path, feedback);
- refine.py: the refinement of the session's meta-prompt (`refine_if_due`, `refine_pending`) and its condensing;
- sessions.py: show / reset / rollback and the read-only views (resources, CLI);
- text.py: the paper's prompts filled in, and reading the model's answers;
- storage/lwe_sessions.py (outside this package): every read and write of the lwe_* tables (`LweRepository`).
"""

from judge_mcp.methods.lwe.judging import initial_meta_prompt, lwe_judge, vanilla_pair
from judge_mcp.methods.lwe.refine import MAX_META_TOKENS, condense_budget, refine_budget, refine_if_due, refine_pending
from judge_mcp.methods.lwe.sessions import export_session, list_sessions, lwe_session, meta_prompt_text, session_history

__all__ = [
    "MAX_META_TOKENS",
    "condense_budget",
    "export_session",
    "initial_meta_prompt",
    "list_sessions",
    "lwe_judge",
    "lwe_session",
    "meta_prompt_text",
    "refine_budget",
    "refine_if_due",
    "refine_pending",
    "session_history",
    "vanilla_pair",
]
