"""Running oncely inside web frameworks and servers (docs/embedding.md).

One small module per framework or server: `starlette` (FastAPI, Starlette), `flask`, `django`,
`gunicorn`. None of them is a dependency of oncely: a module needs its framework only when it is
imported, and ``import oncely`` imports none of them.
"""

from oncely.integrations.connections import driver_connection

__all__ = ["driver_connection"]
