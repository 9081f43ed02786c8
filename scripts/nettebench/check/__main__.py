"""The old way in, this subpackage run as a module, ends in one line naming the command's form,
``python -m nettebench check ...``, exit status 2 (:func:`.vocabulary.commands.moved`)."""

import sys

from nettebench.vocabulary.commands import moved

sys.exit(moved(__spec__.name))
