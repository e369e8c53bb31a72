"""Measurements as data: result bundles, the suite that makes them, datasheet peaks, comparison.

``gpulesson measure`` runs the suite (:mod:`gpulesson.results.suite`, entries in
``entries_*.py``) and writes a bundle (:mod:`gpulesson.results.bundle`, format
``bundle.schema.json``); :mod:`gpulesson.results.datasheets` holds vendor peaks with sources;
:mod:`gpulesson.results.compare` lines bundles up and :mod:`gpulesson.results.render` prints
them. Used by ``gpulesson measure``, ``gpulesson compare`` and the site's results pages.
"""
