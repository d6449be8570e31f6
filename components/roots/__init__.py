"""The composition roots of the three projects, as typed functions (docs/architecture.md).

`__main__.py` (the platform), `jobs/__main__.py` (a team's job stack) and `fleet/__main__.py`
(a fleet's manager) are each one call of a function here; `pulumi up` runs that file, and so
does `python -m synth` (synth/harness.py), which reads the one typed value the call returns
(`results.RootResult`) instead of the root module's variables. The top layer: a root composes
the components and the analysis, and nothing imports a root.
"""
