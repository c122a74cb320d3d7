"""Every operation of docs/openapi.json, as generated (one module each).

    from cairn_client.api import get_run
    view = get_run.sync(run_id, client=cairn.raw)

Each module has `sync`, `sync_detailed`, `asyncio` and `asyncio_detailed`;
they return the model or an `ErrorResponse` instead of raising. The
hand-written `Client` is the friendlier way for the operations it covers;
these reach the rest (limits, principals, audit, compaction, ...). For
static type checkers, import them from `cairn_client._generated.api.default`.
"""

import importlib
import pkgutil

from ._generated.api import default as _default

__all__: list[str] = []
for _module in pkgutil.iter_modules(_default.__path__):
    globals()[_module.name] = importlib.import_module(f"{_default.__name__}.{_module.name}")
    __all__.append(_module.name)
