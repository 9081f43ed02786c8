"""Getting a dataset ready for the trainer: one module per job.

* :mod:`.fetch` - download with retries and verification, plus a manifest;
* :mod:`.extract` - safe, all-or-nothing unpacking of an archive;
* :mod:`.local` - use a folder the user already has, in place;
* :mod:`.synthetic` - generate a learnable, Imagenette-shaped JPEG dataset;
* :mod:`.info` - ``dataset.json``, which every route writes last and the trainer reads;
* :mod:`.images` - every image decodes (or is skipped and listed), before any cell reads it;
* :mod:`.repair` - an image that stops decoding later: the file, and the step that fixes it;
* :mod:`.walk` - the one walk of a tree's images (ImageFolder's order, no link followed), which
  every reader of a dataset's files uses, and a local folder's cheap stamp;
* :mod:`.verify` - checks;
* :mod:`.testing` - real tiny archives and a local HTTP server, for tests.

The catalog of datasets known by name and the error type are the ground floor's
(:mod:`nettebench.vocabulary.dataset_catalog`, :mod:`nettebench.vocabulary.dataset_errors`),
like the atomic writes (:mod:`nettebench.vocabulary.atomic`). May import the ground floor only.

Importing this package (or info/fetch/extract/local/images/walk) loads only the standard
library: Snakemake imports the walk while it parses the workflow. Only :mod:`.synthetic`
needs numpy and Pillow at import; :mod:`.images` imports Pillow when it decodes. Nothing here
needs torch.
"""

from .info import DataRoot, load_data_root

__all__ = ["DataRoot", "load_data_root"]
