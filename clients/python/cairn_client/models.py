"""The typed models of the API, generated from docs/openapi.json.

Every schema of the document is a class here (`RunView`, `Run`, `Wait`,
`Answered`, `Event`, `RunStatus`, ...), with `from_dict()` and `to_dict()`.
Fields the client does not know are kept in `additional_properties`, never
an error: the API only ever adds fields.
"""

from ._generated.models import *  # noqa: F403
from ._generated.models import __all__  # noqa: F401
