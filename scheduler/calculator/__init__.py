"""How much memory a model needs: the calculator, its presets and its check against measured hardware.

Decides, from a model's architecture and serving settings alone, the GPU memory it needs term by
term (``memory``), how many GPUs of each type and which pools could hold it (``fit``), the
one-click links to a create form (``links``), the whole answer the page and the API share
(``answer``, ``views``, ``forms``, ``api/``), the architecture presets of popular models
(``presets``, ``data/model_presets.yaml``) and the comparison with memory measured on real GPUs
(``check``, ``data/gpu-measurements/``). It reads what the pools hold now through
``scheduler.admission.usage`` (the same count admission makes) and ``scheduler``'s shared records;
it must not import ``scheduler.planning`` (where models go) nor ``scheduler.rightsizing``, which
builds on it. tests/test_architecture.py holds it to that.
"""
