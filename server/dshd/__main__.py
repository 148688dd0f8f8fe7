from dshd.cli import main

raise SystemExit(main())
