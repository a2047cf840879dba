"""spark-submit driver (spark-submit cannot run a console script): see conf/spark-submit.sh."""

from jobs.cli import console_main

if __name__ == "__main__":
    console_main()
