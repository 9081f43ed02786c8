"""Library versions from source: clone, build and install torchvision or apex, then use it.

The libraries that can be built and the files a build leaves are the ground floor's
(:mod:`nettebench.vocabulary.build_catalog`). Owns the build steps (:mod:`.build`, the
``library_*`` rules' command) and putting a build first on the import path (:mod:`.activate`,
called by the trainer before torchvision or apex is imported). The config's ``builds:`` plans are
:mod:`nettebench.study.builds`. May import the ground floor only; imports nothing heavy.
"""
