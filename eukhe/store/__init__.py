"""The session store (S1): the journal, the trees folded from it, the ledger that keeps them in step, and the
session directories. It sits below jobs, the harness and the session, and imports none of them.
"""
