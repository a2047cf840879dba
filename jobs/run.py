"""spark-submit driver (spark-submit cannot run a console script): see conf/spark-submit.sh."""

import sys

from jobs.cli import main

if __name__ == "__main__":
    sys.exit(main())
