"""The routing pickers, one per module: each turns weighted score totals into one worker.

The Picker base class is in
scaling/routing/router.py; scaling/routing/policies.py chooses each policy's picker.
"""
