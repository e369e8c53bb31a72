"""The course's lessons, one module per lesson: each lesson's renderers and texts.

``gpulesson/course/<lesson>.py`` is named after the lesson's page, its slug with ``-`` as
``_`` (``docs/lessons/why-gpus.md`` -> :mod:`gpulesson.course.why_gpus`), and holds what
only that page shows: the functions that turn frozen results into its Markdown tables,
charts and sentences, its fixed texts, and the values its quiz's templated questions show.
A renderer several lessons use lives in the module of the lesson that introduces it (the
first in the course's order, ``nav`` of ``mkdocs.yml``); later lessons import it from
there. :mod:`gpulesson.course.common` holds what many lessons share and none introduces:
the quizzes' :func:`~gpulesson.course.common.decades` and its kin.

The layers: the topic packages (:mod:`gpulesson.timing`, :mod:`~gpulesson.memory`,
:mod:`~gpulesson.precision`, :mod:`~gpulesson.errors`, :mod:`~gpulesson.results`,
:mod:`~gpulesson.inside`, :mod:`gpulesson.probe`) compute and measure and return frozen
results; the modules here render those results and compute nothing; :mod:`gpulesson.site`
runs the build and computes nothing either. ``tests/test_layers.py`` checks all three.
"""
