import sys

from governor_client.cli import main

sys.exit(main())
