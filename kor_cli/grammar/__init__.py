"""kor-cli's own constrained-decoding engine (no other engine is wrapped).

Pipeline: JSON Schema / regex / choice list → regex AST → byte NFA → minimised byte DFA
(`byte_dfa.ByteDFA`) → per-state allowed-token bitmask (`index.TokenIndex`, over the exact
bytes of every token from `vocab.TokenizerInfo`) → per-request `matcher.GrammarMatcher`.
Code outside this package uses only `kor_cli.grammar.surface` (the one matcher surface).

Contract of `byte_dfa.ByteDFA` (shared by every module here):
- `transitions`: int32 array [num_states, 256]; state 0 is the dead state (all its
  transitions go to 0, it is never accepting).
- `accepting`: bool array [num_states]; `start`: the start state (never 0).
"""

from kor_cli.grammar.json_drafts import ignored_keywords

__all__ = ["ignored_keywords"]
