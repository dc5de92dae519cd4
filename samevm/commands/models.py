"""samevm models [list|fetch NAME|path NAME]: known models, what is installed, fetch one."""
from __future__ import annotations

from runtime import catalog


def register(sub) -> None:
    p = sub.add_parser("models", help="list known models, fetch one, or print its path")
    p.add_argument("action", nargs="?", default="list", choices=["list", "fetch", "path"])
    p.add_argument("name", nargs="?", default=None, help="model name (default: the settings' model)")
    p.set_defaults(func=run)


def run(args, settings) -> int:
    from worker import catalog as worker_catalog    # here, not in every samevm start (the parser imports each command)

    name = args.name or settings.model
    if args.action == "fetch" and name in worker_catalog.MODELS:
        print(worker_catalog.fetch(name, settings.home))
    elif args.action == "fetch":
        print(catalog.fetch(name, settings.home))
    elif args.action == "path":
        print(catalog.resolve(name, settings.home, auto_fetch=False))
    else:
        for row in catalog.listing(settings.home) + worker_catalog.listing(settings.home):
            mark = "*" if row["default"] else " "
            state = row["path"] if row["installed"] else "not installed"
            print(f"{mark} {row['name']:<22} {row['description']}\n    {state}")
    return 0
