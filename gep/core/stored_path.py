"""A folder as the models hold it: a ``Path`` in the code, the string it always was outside.

One word, one type (issue 46): ``workspace`` is the person's folder, ``repo`` the opened repository,
``clone_dir`` the cycle's isolated clone, ``work_tree`` where a mutator makes the change (the clone, or in
prompt mode the workspace). Stored rows (a cycle's run record, the git layer's records), JSON answers and
Prefect's parameters keep the string, so data written before reads the same and a user's
``--param workspace=DIR`` still works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import PlainSerializer

# dumped as the string in both modes: callers that json.dumps a model_dump() keep working
StoredPath = Annotated[Path, PlainSerializer(str, return_type=str)]
