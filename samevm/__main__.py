from samevm.cli import main

raise SystemExit(main())
