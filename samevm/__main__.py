from samevm import collector

collector.pause()                   # during the imports below; cli.main resumes it
from samevm.cli import main  # noqa: E402

raise SystemExit(main())
