"""The one exception the dataset layer raises, and how a command line reports it.

Everything that can go wrong while getting a dataset ready (an unreachable URL, a corrupt or
hostile archive, a folder without ``train/``) is raised as :class:`DatasetError` with a message
that names the file or URL involved and says what to do next. The command lines print that
message as ``error: ...`` and exit 1 (:func:`nettebench.vocabulary.commands.run`), so a user
reading a Snakemake log sees one actionable line instead of a traceback. Bugs (anything else)
still raise normally, with their traceback.
"""

from __future__ import annotations


class DatasetError(Exception):
    """A dataset could not be fetched, verified, extracted or found; the message says why."""
