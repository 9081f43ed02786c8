"""Library versions from source: clone, build and install torchvision or apex, then use it.

Owns the libraries that can be built and the files a build leaves (:mod:`.catalog`, a
stdlib-only leaf that the parse-time study reads), the build steps (:mod:`.build`, the
``library_*`` rules' command) and putting a build first on the import path (:mod:`.activate`,
called by the trainer before torchvision or apex is imported). The config's ``builds:`` plans are
:mod:`nettebench.study.builds`. Imports nothing heavy.
"""
