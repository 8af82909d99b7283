from typing import Any, Optional, Union

from fsspec.spec import AbstractFileSystem

from . import Image

class HoardFileSystem(AbstractFileSystem):
    image: Image
    def __init__(
        self,
        fo: str = "",
        target_protocol: Optional[str] = None,
        target_options: Optional[dict] = None,
        offset: Union[str, int] = "auto",
        cache_size: Optional[int] = None,
        **kwargs: Any,
    ) -> None: ...
