"""Everything only MkDocs needs: hooks, executed-block machinery, facts and claims, content.

Nothing outside this package imports it; see the map in ``gpulesson/__init__.py``.
"""
