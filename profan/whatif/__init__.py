"""``profan whatif``: a measured step projected onto another chip, compilation or mesh.

* ``arithmetic``: the projection as pure functions (an execution's time on the target from its
  time and roofline terms on the source; the step's idle and host time);
* ``carry``: the carry-over model's fitted parameters (``profan/data/whatif.toml``);
* ``fit``: how those parameters are fitted from two recordings of one program;
* ``scaling``: the step-time arithmetic of whole training runs (MODEL.md section 7);
* ``project``: a report (and an HLO dump) turned into a ``Projection``;
* ``mesh``: the traced program on another mesh, its collectives recosted (an estimate);
* ``render``: the projection as terminal text, Markdown, JSON and HTML.

docs/whatif.md describes the model, its parameters and residuals.
"""
