"""The routing filters, one per module: each keeps or drops one worker for one request.

Every filter must keep a worker for the router to score it (scaling/routing/router.py has
the Filter base class; scaling/routing/policies.py chooses which filters a policy runs).
"""
