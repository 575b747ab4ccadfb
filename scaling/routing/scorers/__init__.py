"""The routing scorers, one per module: each rates every candidate from 0 to 1 on one concern.

The router adds the ratings up by weight (scaling/routing/router.py has the Scorer base
class; scaling/routing/policies.py chooses the scorers and weights of each policy).
"""
