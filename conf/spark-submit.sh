#!/usr/bin/env bash
# Run replay-audit under a real spark-submit (the cluster run mode of issue 3), locally:
#
#   conf/spark-submit.sh ingest --input sample=samples/broker-4.3.1 --output /tmp/audit
#
# Every argument goes to `replay-audit` (jobs/run.py is the driver: spark-submit cannot run a console
# script). spark-submit owns master, jars and the Delta settings here; jobs/spark_session.py takes
# the session spark-submit made and changes none of it. Environment:
#   SPARK_MASTER      master URL (default local[2]). With a cluster's master (spark://, yarn, k8s://),
#                     the settings for this machine below (loopback driver address, this repo's
#                     interpreter on the workers, two shuffle partitions, a 6 GiB driver, no UI) are
#                     left out: install the wheel (it carries a C extension) on every node, or ship a
#                     packed environment with
#                     KRA_SUBMIT_ARGS="--archives env.tar.gz#env --conf spark.pyspark.python=./env/bin/python".
#   KRA_DELTA_PACKAGE the Delta artifact for --packages (default: the build of this repo's pyspark line,
#                     io.delta:delta-spark_<spark major.minor>_2.13:<version>); a cluster's Spark line
#                     may differ (a Delta build of another line fails at the first write with a
#                     NoSuchMethodError): name its build, or set it empty where the cluster has Delta
#   KRA_DRIVER_MEMORY the driver's memory on this machine (default 6g, as local runs)
#   KRA_SUBMIT_ARGS   extra spark-submit options, word-split (e.g. "--name x --conf k=v")
#   KRA_PYTHON        the interpreter of driver and workers (default the repo's .venv/bin/python)
#   KRA_CACHE, KRA_DELTA_VERSION, DEFAULT_ARTIFACT_REPOSITORY: as for local runs
# Under spark-submit, Spark's PythonRunner writes the job's stderr to stdout: the closing line
# (`replay-audit: valid; ...`, or why it failed) is among the table lines there.
# The Delta coordinate and the Ivy cache/settings come from jobs/spark_session.py, so a local run
# and this one share one resolved set of jars (nothing is downloaded twice). The command it runs:
#
#   spark-submit --master local[2] --driver-memory 6g \
#     --packages io.delta:delta-spark_4.1_2.13:4.4.0 \
#     --conf spark.jars.ivy=$KRA_CACHE/ivy --conf spark.jars.ivySettings=$KRA_CACHE/ivy/ivysettings.xml \
#     --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
#     --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
#     --conf spark.pyspark.python=.venv/bin/python --conf spark.pyspark.driver.python=.venv/bin/python \
#     --conf spark.python.sql.dataFrameDebugging.enabled=false --conf spark.buffer.pageSize=2m \
#     jobs/run.py "$@"
# (plus the UI and time-zone settings below). The debugging switch is LOCAL_CONF's: without it
# PySpark sends the Python call site of every Column call to the JVM (about 27,000 Py4J round
# trips to plan one audit); an analysis error still names the column and the plan. So is the page
# size: each hash relation a broadcast join reads holds one page on the heap, and Spark's default
# page (a share of the heap: 64 MiB for a 6 GiB driver) made an audit's few dozen small broadcasts
# hold hundreds of MiB.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${KRA_PYTHON:-$root/.venv/bin/python}"
submit="$(dirname "$python")/spark-submit"
[[ -x "$submit" ]] || submit="spark-submit"
# pip's spark-submit finds SPARK_HOME with this interpreter (else `python3` from PATH).
export PYSPARK_DRIVER_PYTHON="$python"

# One line each: the Delta coordinate, spark.jars.ivy, spark.jars.ivySettings (written if missing).
mapfile -t delta < <(
    cd "$root" && "$python" -c '
from jobs.spark_session import _write_ivy_settings, cache_dir, delta_maven_coordinate
ivy = cache_dir() / "ivy"
print(delta_maven_coordinate())
print(ivy)
print(_write_ivy_settings(ivy))
'
)
[[ ${#delta[@]} -eq 3 ]] || { echo "spark-submit.sh: could not read the Delta settings of jobs/spark_session.py" >&2; exit 2; }

master="${SPARK_MASTER:-local[2]}"
# Settings for a run on this machine only: executors elsewhere could reach no loopback driver, nor
# run this repo's interpreter, two shuffle partitions would leave a cluster's cores idle, and a
# cluster's driver memory and UI are its operators' to set.
this_machine=()
if [[ "$master" == local* ]]; then
    # The workers' interpreter: pyspark reads it from PYSPARK_PYTHON too, so a cluster's run gets neither.
    export PYSPARK_PYTHON="$python"
    this_machine=(
        --driver-memory "${KRA_DRIVER_MEMORY:-6g}"
        --conf "spark.pyspark.python=$python"
        --conf spark.sql.shuffle.partitions=2
        --conf spark.driver.bindAddress=127.0.0.1
        --conf spark.driver.host=127.0.0.1
        --conf spark.ui.enabled=false
        --conf spark.ui.showConsoleProgress=false
    )
fi
# The Delta jars: KRA_DELTA_PACKAGE, when set (empty: none, the cluster has Delta), else this repo's.
packages=(--packages "${KRA_DELTA_PACKAGE-${delta[0]}}")
[[ -n "${KRA_DELTA_PACKAGE-${delta[0]}}" ]] || packages=()

# shellcheck disable=SC2086  # KRA_SUBMIT_ARGS is word-split on purpose
exec "$submit" \
    --master "$master" \
    "${packages[@]}" \
    --conf "spark.jars.ivy=${delta[1]}" \
    --conf "spark.jars.ivySettings=${delta[2]}" \
    --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
    --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
    "${this_machine[@]}" \
    --conf "spark.pyspark.driver.python=$python" \
    --conf spark.sql.session.timeZone=UTC \
    --conf spark.python.sql.dataFrameDebugging.enabled=false \
    --conf spark.buffer.pageSize=2m \
    ${KRA_SUBMIT_ARGS:-} \
    "$root/jobs/run.py" "$@"
