"""Type stubs for hoard.distributed: build one image on a Dask cluster."""

from typing import Any, Callable, Dict, List, Optional, Tuple

from . import StrPath

ENTRY_WEIGHT: int

BY: Tuple[str, ...]

def plan(source: StrPath, shards: int, by: str = "similarity") -> List[List[bytes]]: ...
def create(
    source: StrPath,
    output: StrPath,
    client: Any,
    shards: Optional[int] = None,
    level: int = 7,
    retries: int = 2,
    parts_dir: Optional[StrPath] = None,
    progress: Optional[Callable[[int, int], None]] = None,
    force: bool = False,
    by: str = "similarity",
    **options: Any,
) -> Dict[str, Any]: ...
