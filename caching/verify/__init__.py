"""Second opinion on a semantic cache match: reject the near-misses embeddings confuse.

A sentence embedding pools meaning over the whole sentence, so one small word that flips
the answer ("Cancel my subscription" / "Don't cancel my subscription") barely moves the
vector. caching.verify.verdict.verify() turns such pairs down; its docstring lists what it
catches and what it misses. One module per concern, each holding its own word lists:

- verdict: verify() and its Verdict, the order of the checks;
- features: a text as the check sees it (words, names, dates, negations, units);
- negation, quantities, dates: the words and rules behind those features;
- antonyms, roles: the checks that compare the two texts' words.
"""
